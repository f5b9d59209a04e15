#include "sandfort/http/url_client.hpp"
#include "sandfort/http/any_stream.hpp"
#include "sandfort/http/tls_client.hpp"
#include "sandfort/http/use_tuple.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <memory>
#include <optional>

namespace sandfort::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using error_code = boost::system::error_code;

namespace {

constexpr std::uint32_t header_limit = 16u << 10;

std::uint16_t default_port(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Spaces, controls and raw non-ASCII bytes have no place in a URL; letting them through would
// put them on the request line.
bool has_forbidden_byte(std::string_view s) {
  for (unsigned char c : s)
    if (c <= 0x20 || c >= 0x7f) return true;
  return false;
}

bool is_reg_name(std::string_view host) {
  if (host.empty()) return false;
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              c == '_';
    if (!ok) return false;
  }
  return true;
}

bool is_ipv6_literal(const std::string& host) {
  error_code ec;
  (void)asio::ip::make_address_v6(host, ec);
  return !ec;
}

error bad_url(const std::string& why) { return make_error(errc::invalid_argument, "invalid URL: " + why); }

// Empty text keeps the scheme's default port (RFC 3986 allows "host:").
result<std::uint16_t> parse_port(std::string_view text, std::uint16_t fallback) {
  if (text.empty()) return fallback;
  if (text.size() > 5) return bad_url("port out of range");
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return bad_url("port is not a number");
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value == 0 || value > 65535) return bad_url("port out of range");
  return static_cast<std::uint16_t>(value);
}

// Fills host and port from the authority ("host", "host:port", "[v6]:port").
result<void> parse_authority(std::string_view authority, url_parts& parts) {
  if (authority.find('@') != std::string_view::npos) return bad_url("user info (user:password@) is not supported");
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return bad_url("unterminated IPv6 literal");
    parts.host = ascii_lower(authority.substr(1, close - 1));
    // A zone id ("%eth0") would need escaping in the Host header; nobody serves JWKS that way.
    if (parts.host.find('%') != std::string::npos || !is_ipv6_literal(parts.host))
      return bad_url("[" + parts.host + "] is not an IPv6 address");
    auto after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') return bad_url("unexpected text after the IPv6 literal");
    if (!after.empty()) port_text = after.substr(1);
  } else {
    auto colon = authority.find(':');
    auto host = authority.substr(0, colon);
    if (host.empty()) return bad_url("no host");
    if (!is_reg_name(host)) return bad_url("the host name has invalid characters");
    parts.host = ascii_lower(host);
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  auto port = parse_port(port_text, default_port(parts.scheme));
  if (!port) return std::move(port).err();
  parts.port = *port;
  return {};
}

std::string origin(const url_parts& parts) { return parts.scheme + "://" + host_header(parts); }

// What is sent: a GET, or a POST of a form (an OAuth token request).
struct outgoing {
  verb method = verb::get;
  std::string form_body;
  std::string authorization;  // empty: no Authorization header
  std::string content_type = "application/x-www-form-urlencoded";
  header_list headers = {};
};

// One fetch in flight: where to, what, with what limits, and when it must be over.
struct fetch_job {
  url_parts parts;
  url_fetch_options options;
  clock_type::time_point deadline;
  outgoing sent;
};

// The one shape of every transport failure: which peer, which step, why.
error unavailable(const fetch_job& job, std::string_view step, const error_code& ec) {
  std::string cause = ec == beast::error::timeout
                          ? "no answer within " + std::to_string(job.options.timeout.count()) + " ms"
                          : ec.message();
  return make_error(errc::unavailable,
                    "fetching from " + origin(job.parts) + ": " + std::string(step) + " failed: " + cause);
}

// Beast's timer only cancels operations that have to wait: one that can complete at once (a
// loopback connect, a write into an empty socket buffer) still runs after the deadline. So no
// step starts once the deadline has passed.
std::optional<error> past_deadline(const fetch_job& job, std::string_view step) {
  if (clock_type::now() < job.deadline) return std::nullopt;
  return unavailable(job, step, beast::error::timeout);
}

// The resolver runs getaddrinfo on a helper thread and cannot interrupt it, so the deadline is
// a timer that the lookup's completion cancels; on timeout the lookup finishes into this
// shared state later, unobserved.
struct pending_lookup {
  explicit pending_lookup(const asio::any_io_executor& ex) : wake(ex) {}
  asio::steady_timer wake;
  bool done = false;
  error_code ec;
  tcp::resolver::results_type endpoints;
};

asio::awaitable<result<tcp::resolver::results_type>> resolve(const fetch_job& job) {
  auto ex = co_await asio::this_coro::executor;
  tcp::resolver resolver(ex);
  auto lookup = std::make_shared<pending_lookup>(ex);
  lookup->wake.expires_at(job.deadline);
  resolver.async_resolve(job.parts.host, std::to_string(job.parts.port), tcp::resolver::numeric_service,
                         [lookup](const error_code& ec, tcp::resolver::results_type endpoints) {
                           lookup->done = true;
                           lookup->ec = ec;
                           lookup->endpoints = std::move(endpoints);
                           lookup->wake.cancel();
                         });
  auto [wec] = co_await lookup->wake.async_wait(use_tuple);
  if (!lookup->done && wec) co_return unavailable(job, "name lookup", wec);  // cancelled from outside
  if (!lookup->done) co_return unavailable(job, "name lookup", beast::error::timeout);
  if (lookup->ec) co_return unavailable(job, "name lookup", lookup->ec);
  co_return std::move(lookup->endpoints);
}

result<ssl::context> make_tls_context(const url_fetch_options& options) {
  ssl::context ctx(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  ctx.set_verify_mode(ssl::verify_peer);
  error_code ec;
  if (options.ca_file.empty())
    ctx.set_default_verify_paths(ec);
  else
    ctx.load_verify_file(options.ca_file, ec);
  if (ec) {
    std::string source = options.ca_file.empty() ? "the system trust store" : "the CA file " + options.ca_file;
    return make_error(errc::unavailable, "cannot load " + source + ": " + ec.message());
  }
  return ctx;
}

request make_request(const url_parts& parts, const outgoing& sent) {
  request req{sent.method, parts.target, 11};
  req.set(bhttp::field::host, host_header(parts));
  req.set(bhttp::field::user_agent, "sandfortd");
  req.set(bhttp::field::accept, "application/json");
  req.set(bhttp::field::connection, "close");
  if (!sent.authorization.empty()) req.set(bhttp::field::authorization, sent.authorization);
  for (const auto& [name, value] : sent.headers) req.set(name, value);
  if (sent.method == verb::post) {
    req.set(bhttp::field::content_type, sent.content_type);
    req.body() = sent.form_body;
    req.prepare_payload();
  }
  return req;
}

asio::awaitable<result<response>> exchange(any_stream& stream, const fetch_job& job) {
  if (auto late = past_deadline(job, "sending the request")) co_return std::move(*late);
  auto req = make_request(job.parts, job.sent);
  auto [wec, written] = co_await bhttp::async_write(stream, req, use_tuple);
  if (wec) co_return unavailable(job, "sending the request", wec);

  beast::flat_buffer buffer = bounded_read_buffer();
  bhttp::response_parser<bhttp::string_body> parser;
  parser.header_limit(header_limit);
  parser.body_limit(job.options.body_limit);
  auto [rec, received] = co_await bhttp::async_read(stream, buffer, parser, use_tuple);
  if (rec == bhttp::error::body_limit && job.options.truncate_body && parser.is_header_done()) {
    auto cut = parser.release();
    cut.body().clear();  // what was read of it is not the answer; the status is
    co_return cut;
  }
  if (rec == bhttp::error::body_limit)
    co_return make_error(errc::unavailable, "fetching from " + origin(job.parts) + ": the response body exceeds " +
                                                std::to_string(job.options.body_limit) + " bytes");
  if (rec == bhttp::error::header_limit)
    co_return make_error(errc::unavailable, "fetching from " + origin(job.parts) + ": the response headers exceed " +
                                                std::to_string(header_limit) + " bytes");
  if (rec) co_return unavailable(job, "reading the response", rec);
  co_return parser.release();
}

// No TLS shutdown afterwards: the whole response is read and the connection is ours alone, so
// waiting for the peer's close_notify could only delay the caller.
asio::awaitable<result<response>> exchange_tls(any_stream& stream, ssl::context& ctx, const fetch_job& job) {
  if (auto late = past_deadline(job, "TLS handshake")) co_return std::move(*late);
  auto [hec] = co_await async_start_tls_client(stream, ctx, job.parts.host, use_tuple);
  if (hec) co_return unavailable(job, "TLS handshake", hec);
  co_return co_await exchange(stream, job);
}

}  // namespace

result<url_parts> parse_url(std::string_view url) {
  if (url.empty()) return bad_url("empty");
  if (has_forbidden_byte(url)) return bad_url("it contains spaces, control or non-ASCII characters");
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return bad_url("not an absolute http:// or https:// URL");
  url_parts parts;
  parts.scheme = ascii_lower(url.substr(0, scheme_end));
  if (parts.scheme != "http" && parts.scheme != "https") return bad_url("unsupported scheme " + parts.scheme);

  auto rest = url.substr(scheme_end + 3);
  auto authority_end = rest.find_first_of("/?#");
  auto authority = rest.substr(0, authority_end);
  if (auto ok = parse_authority(authority, parts); !ok) return std::move(ok).err();

  // The fragment belongs to the client, never to the request.
  auto target = authority_end == std::string_view::npos ? std::string_view{} : rest.substr(authority_end);
  target = target.substr(0, target.find('#'));
  parts.target = target.empty() || target.front() != '/' ? "/" + std::string(target) : std::string(target);
  return parts;
}

std::string host_header(const url_parts& parts) {
  std::string out = parts.host.find(':') != std::string::npos ? "[" + parts.host + "]" : parts.host;
  if (parts.port != default_port(parts.scheme)) out += ":" + std::to_string(parts.port);
  return out;
}

namespace {

asio::awaitable<result<response>> send(std::string url, url_fetch_options options, outgoing sent) {
  auto parts = parse_url(url);
  if (!parts) co_return std::move(parts).err();
  bool tls = parts->scheme == "https";
  if (!tls && !options.allow_plain_http)
    co_return make_error(errc::invalid_argument, "plain http:// is not allowed for " + parts->host + "; use https://");
  std::optional<ssl::context> ctx;
  if (tls) {
    auto made = make_tls_context(options);
    if (!made) co_return std::move(made).err();
    ctx.emplace(std::move(*made));
  }

  // One deadline for everything: the stream's timer is absolute, so every later read, write and
  // handshake step shares what the lookup and the connect left of it.
  const auto deadline = clock_type::now() + options.timeout;
  const fetch_job job{std::move(*parts), std::move(options), deadline, std::move(sent)};
  auto endpoints = co_await resolve(job);
  if (!endpoints) co_return std::move(endpoints).err();
  if (job.options.refuse_address)
    for (const auto& e : *endpoints)
      if (auto why = job.options.refuse_address(e.endpoint().address()))
        co_return make_error(errc::permission_denied, job.parts.host + " resolves to " +
                                                          e.endpoint().address().to_string() + ": " + *why);
  if (auto late = past_deadline(job, "connect")) co_return std::move(*late);
  any_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(job.deadline - clock_type::now());
  auto cec = co_await connect_first(stream, *endpoints);
  if (cec) co_return unavailable(job, "connect", cec);
  if (tls) co_return co_await exchange_tls(stream, *ctx, job);
  co_return co_await exchange(stream, job);
}

}  // namespace

asio::awaitable<result<response>> post_body(std::string url, std::string content_type, std::string body,
                                            header_list headers, url_fetch_options options) {
  outgoing sent{verb::post, std::move(body), {}, std::move(content_type), std::move(headers)};
  co_return co_await send(std::move(url), std::move(options), std::move(sent));
}

asio::awaitable<result<response>> fetch_url(std::string url, url_fetch_options options) {
  outgoing get;  // named: GCC 12 mishandles a temporary in a co_await expression
  co_return co_await send(std::move(url), std::move(options), std::move(get));
}

asio::awaitable<result<response>> post_form(std::string url, std::string form_body, std::string authorization,
                                            url_fetch_options options) {
  outgoing sent{verb::post, std::move(form_body), std::move(authorization)};
  co_return co_await send(std::move(url), std::move(options), std::move(sent));
}

}  // namespace sandfort::http
