#include "sandfort/preview/server.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <functional>
#include <list>
#include <optional>
#include <spdlog/spdlog.h>
#include <variant>

#include "sandfort/http/cookie.hpp"
#include "sandfort/crypto/digest.hpp"
#include "sandfort/http/proxy.hpp"
#include "sandfort/http/server.hpp"
#include "sandfort/preview/request.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::preview {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = http::bhttp;
using tcp = asio::ip::tcp;

namespace {

constexpr std::string_view token_header = "X-Sandfort-Preview-Token";
constexpr std::string_view token_cookie = "sandfort_preview_token";
constexpr std::string_view token_parameter = "sandfort_token";
// E2B's SDK hands its users the E2B sandbox plane's access token as `trafficAccessToken`, which
// E2B's docs send to a preview host in this header; it is not a preview credential here, and the
// app must not be handed it (docs/e2b.md, "getHost").
constexpr std::string_view e2b_traffic_header = "E2B-Traffic-Access-Token";

// A request being relayed, and how to end it from outside.
struct open_relay {
  std::string sandbox_id;
  std::function<void()> close;
};

}  // namespace

struct preview_server::state {
  preview_options options;
  preview_directory& directory;
  http::server http;
  std::list<open_relay> relays;

  state(asio::io_context& ioc, preview_options o, preview_directory& d, http::server_options http_options,
        http::handler fallback)
      : options(std::move(o)), directory(d), http(ioc, std::move(http_options), std::move(fallback)) {}
};

namespace {

using state = preview_server::state;

// Our own answers are short and say what happened, never more.
http::response page(unsigned status, const std::string& text) {
  http::response res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
  res.set(bhttp::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.body() = text + "\n";
  return res;
}

http::response unauthorized() {
  return page(401, "This preview needs its token: the X-Sandfort-Preview-Token header, or open the link with "
                   "?sandfort_token=.");
}

// The cookie a valid ?sandfort_token= is traded for. Host-only (no Domain): it is sent to this
// port of this sandbox and to nothing else.
std::string token_cookie_value(const std::string& token, bool secure) {
  return std::string(token_cookie) + "=" + token + "; Path=/; HttpOnly; SameSite=Lax" + (secure ? "; Secure" : "");
}

// On every answer to a URL that carried the token: the page's own requests and links must not
// send that URL on as Referer, and no cache keeps an answer keyed by it.
void keep_token_url_private(bhttp::fields& answer) {
  answer.set("Referrer-Policy", "no-referrer");
  answer.set(bhttp::field::cache_control, "no-store");
}

// A browser's top-level navigation: the token leaves the address bar (and the history) for the
// cookie.
http::response redirect(const std::string& location, const std::string& set_cookie) {
  http::response res = page(302, "Redirecting to the preview without its token in the address.");
  res.set(bhttp::field::location, location);
  keep_token_url_private(res);
  if (!set_cookie.empty()) res.set(bhttp::field::set_cookie, set_cookie);
  return res;
}

// Where a checked request goes.
struct upstream {
  std::string sandbox_id;
  std::string address;  // empty: through the sandbox's agent (dials_home)
  unsigned short port = 0;
  std::string target;  // without our token parameter
  // The URL carried the token: the answer gets keep_token_url_private() and, when the token was
  // valid, this Set-Cookie value.
  bool token_in_url = false;
  std::string set_cookie;
};

// Either an answer of our own (a page, the token redirect) or the go-ahead.
using verdict = std::variant<http::response, upstream>;

// How a request showed the token.
enum class proof { none, header, cookie };

// Empty `expected` (the sandbox has no key) matches nothing.
proof presented_token(const bhttp::request_header<>& req, const std::string& expected) {
  if (expected.empty()) return proof::none;
  bool in_header = false, in_cookie = false;
  for (auto [it, end] = req.equal_range(token_header); it != end; ++it)
    in_header |= constant_time_equal(it->value(), expected);
  for (auto [it, end] = req.equal_range(bhttp::field::cookie); it != end; ++it)
    for (const auto& value : http::take_cookie(it->value(), token_cookie).values)
      in_cookie |= constant_time_equal(value, expected);
  if (in_header) return proof::header;
  return in_cookie ? proof::cookie : proof::none;
}

// Every preview host is same-site with every other, so SameSite does not stop a page of one
// sandbox from opening a WebSocket to another with the visitor's cookie, and WebSockets know no
// CORS. A cookie opens one only from a page of the same sandbox, or for a client that sends no
// Origin (not a browser).
bool origin_allowed(const bhttp::request_header<>& req, std::string_view domain, const std::string& sandbox_id) {
  auto it = req.find(bhttp::field::origin);
  if (it == req.end()) return true;
  std::string_view origin(it->value().data(), it->value().size());
  for (std::string_view scheme : {"http://", "https://"}) {
    if (!origin.starts_with(scheme)) continue;
    auto from = parse_host(origin.substr(scheme.size()), domain);
    return from && from->sandbox_id == sandbox_id;
  }
  return false;
}

// "//elsewhere/…" (or "/\elsewhere/…") as a Location would leave this host; "/." in front keeps
// the host and, once the browser drops the dot segment, the path.
std::string same_host(std::string target) {
  if (target.size() > 1 && (target[1] == '/' || target[1] == '\\')) target.insert(0, "/.");
  return target;
}

// A browser opening the link in a tab (Sec-Fetch-Mode: navigate, Sec-Fetch-Dest: document). Not
// an iframe: a cookie set in a cross-site frame may be refused, and the redirect would then end
// at 401. Not a WebSocket, which does not follow redirects.
bool top_level_navigation(const bhttp::request_header<>& req) {
  if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) return false;
  if (beast::websocket::is_upgrade(req)) return false;
  return beast::iequals(req["Sec-Fetch-Mode"], "navigate") && beast::iequals(req["Sec-Fetch-Dest"], "document");
}

// ?sandfort_token= is a link being opened, and the link must work as printed: curl without -L,
// urllib and fetch (which keep no cookies across a redirect) get the app's answer at once, with
// the cookie for the page's later requests. A browser's top-level navigation is redirected to
// the same URL without the token, with the cookie, so the token leaves its address bar.
verdict check_query_token(const bhttp::request_header<>& req, const preview_target& found, query_split query,
                          const std::string& expected, upstream up, bool secure) {
  bool valid = !expected.empty() && constant_time_equal(*query.value, expected);
  if (!valid && !found.public_preview) return unauthorized();
  std::string set_cookie = valid ? token_cookie_value(expected, secure) : std::string();
  if (top_level_navigation(req)) return redirect(same_host(std::move(query.target)), set_cookie);
  up.target = std::move(query.target);
  up.token_in_url = true;
  up.set_cookie = std::move(set_cookie);
  return up;
}

verdict decide(state& st, const bhttp::request_header<>& req) {
  auto address = parse_host(req[bhttp::field::host], st.options.domain);
  if (!address || req.count(bhttp::field::host) != 1 || !req.target().starts_with('/'))
    return page(400, "Not a preview address: expected http://<port>-<sandbox id>." + st.options.domain + "/");
  const std::string& id = address->sandbox_id;
  auto found = st.directory.find(id);
  if (!found) return page(404, "There is no sandbox " + id + ".");
  // A frozen application would hold the request until resume: say so at once instead.
  if (found->state == "paused") return page(503, "Sandbox " + id + " is paused; resume it to reach its preview.");
  if (found->state != "started") return page(503, "Sandbox " + id + " is " + found->state + ", not started.");
  // No address: its container left the sandbox network (or died and the row was cleared). Never
  // relay to an address the sandbox's container does not hold now. A sandbox that dials home has
  // none and is reached through its agent.
  if (found->dials_home && !st.options.open_port) return page(503, "Sandbox " + id + " has no previews here.");
  if (!found->dials_home && found->address.empty())
    return page(503, "Sandbox " + id + " has no address on the sandbox network.");

  upstream up{id, found->dials_home ? std::string() : found->address, address->port, std::string(req.target()), false,
              {}};
  std::string expected = found->key.empty() ? std::string() : make_token(found->key, id, address->port);
  auto query = take_query_parameter(req.target(), token_parameter);
  if (query.value)
    return check_query_token(req, *found, std::move(query), expected, std::move(up),
                             st.options.forwarded_proto == "https");
  if (found->public_preview) return up;
  proof shown = presented_token(req, expected);
  if (shown == proof::none) return unauthorized();
  if (shown == proof::cookie && beast::websocket::is_upgrade(req) && !origin_allowed(req, st.options.domain, id))
    return page(403, "This WebSocket was opened from a page outside sandbox " + id + ".");
  return up;
}

// The application never sees the preview's credentials, nor the console's session should a
// deployment serve previews on the console's own host; its other cookies pass. A Referer that
// still names a URL with the token (a browser that ignores Referrer-Policy) loses the parameter.
void strip_credentials(bhttp::request_header<>& req) {
  req.erase(token_header);
  req.erase(e2b_traffic_header);
  if (auto referer = req.find(bhttp::field::referer); referer != req.end()) {
    auto split = take_query_parameter(referer->value(), token_parameter);
    if (split.value) req.set(bhttp::field::referer, split.target);
  }
  std::vector<std::string> kept;
  for (auto [it, end] = req.equal_range(bhttp::field::cookie); it != end; ++it) {
    auto split = http::take_cookie(it->value(), token_cookie);
    for (std::string_view console : {http::console_cookie, http::console_cookie_secure, http::console_login_cookie,
                                     http::console_login_cookie_secure})
      split = http::take_cookie(split.rest, console);
    if (!split.rest.empty()) kept.push_back(std::move(split.rest));
  }
  req.erase(bhttp::field::cookie);
  for (const auto& cookie : kept) req.insert(bhttp::field::cookie, cookie);
}

void add_forwarded(bhttp::request_header<>& req, const http::exchange& ex, const std::string& proto) {
  std::string client = ex.remote.empty() ? std::string("unknown") : ex.remote;
  std::string host(req[bhttp::field::host]);
  // Proxies in front of this one (a TLS terminator) keep their part of the chain.
  std::string chain;
  for (auto [it, end] = req.equal_range("X-Forwarded-For"); it != end; ++it)
    chain += std::string(it->value()) + ", ";
  req.set("X-Forwarded-Host", host);
  req.set("X-Forwarded-Proto", proto);
  req.set("X-Forwarded-For", chain + client);
}

http::response bad_gateway(const upstream& up, std::string_view what) {
  return page(502, "Nothing " + std::string(what) + " on port " + std::to_string(up.port) + " of sandbox " +
                       up.sandbox_id + ".");
}

// Registers a relay for disconnect() and stop() for as long as it lives.
class relay_registration {
 public:
  relay_registration(std::list<open_relay>& relays, const std::string& sandbox_id, std::function<void()> close)
      : relays_(relays), it_(relays.insert(relays.end(), open_relay{sandbox_id, std::move(close)})) {}
  ~relay_registration() { relays_.erase(it_); }
  relay_registration(const relay_registration&) = delete;
  relay_registration& operator=(const relay_registration&) = delete;

 private:
  std::list<open_relay>& relays_;
  std::list<open_relay>::iterator it_;
};

// To the application: over the sandbox network, or through the sandbox's agent.
asio::awaitable<bool> forward(state& st, http::exchange& ex, upstream up) {
  beast::error_code ec;
  std::optional<asio::ip::address> ip;
  if (!up.address.empty()) {
    ip = asio::ip::make_address(up.address, ec);
    if (ec) {
      spdlog::warn("preview: sandbox {} has no usable address '{}'", up.sandbox_id, up.address);
      http::response gone = bad_gateway(up, "answers");
      co_return co_await http::respond(ex, std::move(gone));
    }
  }
  auto& req = ex.parser.get();
  req.target(up.target);
  strip_credentials(req);
  add_forwarded(req, ex, st.options.forwarded_proto);

  std::optional<http::any_stream> to_app;
  bool ended_by_us = false;
  // The client gets a clean end of stream (a FIN, not a reset); the session closes its socket.
  relay_registration registered(st.relays, up.sandbox_id, [&ended_by_us, &to_app, &ex] {
    ended_by_us = true;
    if (to_app) to_app->close();
    beast::error_code ignored;
    ex.stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
    ex.stream.socket().cancel(ignored);
  });
  if (ip) {
    to_app.emplace(co_await asio::this_coro::executor);
    to_app->expires_after(st.options.connect_timeout);
    auto [cec] = co_await to_app->async_connect(tcp::endpoint(*ip, up.port), use_tuple);
    if (ended_by_us) co_return false;
    if (cec) {
      spdlog::debug("preview: {}:{} of {}: {}", up.address, up.port, up.sandbox_id, cec.message());
      http::response refused = bad_gateway(up, "is listening");
      co_return co_await http::respond(ex, std::move(refused));
    }
    to_app->expires_never();
    to_app->socket().set_option(tcp::no_delay(true), ec);  // header and body go as separate writes
  } else {
    auto opening = st.options.open_port(up.sandbox_id, up.port);
    auto opened = co_await std::move(opening);
    if (ended_by_us) co_return false;
    if (!opened) {
      spdlog::debug("preview: port {} of {}: {}", up.port, up.sandbox_id, opened.err().message);
      http::response refused = opened.err().code == errc::permission_denied
                                   ? page(403, "Port " + std::to_string(up.port) + " of sandbox " + up.sandbox_id +
                                                   " is its agent's own, not an application's.")
                                   : bad_gateway(up, "is listening");
      co_return co_await http::respond(ex, std::move(refused));
    }
    to_app.emplace(std::move(*opened));
  }

  http::relay_options options;
  options.stamp_request_id = false;
  options.no_sniff = false;
  if (up.token_in_url)
    options.amend_answer = [&up](bhttp::fields& answer) {
      keep_token_url_private(answer);
      if (!up.set_cookie.empty()) answer.insert(bhttp::field::set_cookie, up.set_cookie);
    };
  http::relay_result relayed = co_await http::relay(ex, *to_app, std::move(options));
  if (ended_by_us) co_return false;
  if (!relayed.unanswered) co_return relayed.keep_alive;
  spdlog::debug("preview: port {} of {} did not answer: {}", up.port, up.sandbox_id,
                relayed.upstream_error.message());
  http::response silent = bad_gateway(up, "answered");
  co_return co_await http::respond(ex, std::move(silent));
}

asio::awaitable<bool> serve(std::shared_ptr<state> st, http::exchange& ex) {
  verdict decided = decide(*st, ex.parser.get());
  if (auto* answer = std::get_if<http::response>(&decided)) {
    if (ex.parser.get().method() == bhttp::verb::head) answer->body().clear();
    co_return co_await http::respond(ex, std::move(*answer));
  }
  upstream& up = std::get<upstream>(decided);
  co_return co_await forward(*st, ex, std::move(up));
}

// Claims every request, whatever its method and path, so each is checked and routed on its own.
http::stream_selector claim_everything(std::weak_ptr<state> weak) {
  return [weak](const bhttp::request_header<>&, const std::string&,
                std::map<std::string, std::string>&) -> http::stream_handler {
    auto st = weak.lock();
    if (!st) return {};
    return [st](http::exchange& ex) { return serve(st, ex); };
  };
}

// Only reached once the preview server is gone while its connections linger.
asio::awaitable<http::response> stopping(http::context&) {
  co_return page(503, "The preview server is stopping.");
}

}  // namespace

preview_server::preview_server(asio::io_context& ioc, preview_options options, preview_directory& directory) {
  http::server_options http_options;
  http_options.header_timeout = options.header_timeout;
  http_options.idle_timeout = options.idle_timeout;
  http_options.max_connections = options.max_connections;
  http_options.max_idle_per_source = options.max_idle_per_source;
  http_options.max_idle = options.max_idle;
  http_options.idle_source = options.idle_source;
  http_options.listener_name = "preview";
  http_options.config_prefix = "preview.";
  http_options.client_address = options.client_address;
  http_options.log_warning = [](const std::string& line) { spdlog::warn("{}", line); };
  state_ = std::make_shared<state>(ioc, std::move(options), directory, std::move(http_options), &stopping);
  state_->http.set_stream_selector(claim_everything(state_));
}

preview_server::~preview_server() { stop(); }

result<unsigned short> preview_server::listen(const std::string& host_port) { return state_->http.listen_tcp(host_port); }

void preview_server::stop() {
  state_->http.stop();
  // Closing makes each relay's pending reads and writes complete: the list is not touched here.
  for (auto& relay : state_->relays) relay.close();
}

asio::awaitable<void> preview_server::drain(std::chrono::milliseconds deadline) {
  auto st = state_;
  co_await st->http.drain(deadline);
}

void preview_server::disconnect(const std::string& sandbox_id) {
  for (auto& relay : state_->relays)
    if (relay.sandbox_id == sandbox_id) relay.close();
}

std::size_t preview_server::open_relays() const { return state_->relays.size(); }

}  // namespace sandfort::preview
