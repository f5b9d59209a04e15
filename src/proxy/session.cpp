// One connection, one request, one decision: read the head, authenticate, check the target,
// resolve, check every address, dial exactly those, relay.
#include "state.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <spdlog/spdlog.h>
#include <cctype>
#include <utility>
#include <variant>

#include "sandfort/crypto/digest.hpp"
#include "sandfort/metrics/catalog.hpp"
#include "sandfort/proxy/request.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "tunnel.hpp"
#include "wire.hpp"

namespace sandfort::proxy::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using clock = std::chrono::steady_clock;
using state = egress_proxy::state;
using addresses = std::vector<asio::ip::address>;
using head_parser = bhttp::request_parser<bhttp::empty_body>;

namespace {

// After an early answer the client may still be sending: read a little more so it reads our
// answer instead of a reset, but not for long and not much.
constexpr std::size_t max_drained = 1u << 20;
constexpr std::chrono::milliseconds max_drain_time{5'000};

struct denial {
  int status = 0;       // 0: the client gets no answer (the connection was closed under it)
  std::string reason;   // for the log and on_decision
  std::string message;  // for the client
  std::string why = {}; // for the client's status line (deny_response), a few fixed words
};

// What a refused CONNECT's status line says, so that pip's, apt's and npm's own errors say it.
constexpr std::string_view not_on_allowlist = "host not on the sandbox's egress allowlist";
constexpr std::string_view refused_address = "address refused by the sandbox's egress policy";

denial closed_under(const connection& c) { return denial{0, c.closed_because().value_or("closed"), {}}; }

asio::awaitable<void> deny(state& st, connection& c, egress_event& ev, denial d) {
  ev.decision = "deny";
  ev.status = d.status;
  ev.reason = std::move(d.reason);
  report(st, c, ev);
  if (c.closing() || d.status == 0) co_return;
  auto bytes = deny_response(d.status, d.message, d.why);
  c.client.expires_after(st.options.header_timeout);
  auto [ec, n] = co_await asio::async_write(c.client, asio::buffer(bytes), use_tuple);
  c.linger = !ec;
}

denial too_large(std::size_t limit) {
  return {400, "request head too large", "the request head is larger than " + std::to_string(limit) + " bytes"};
}

struct head_read {
  std::size_t length = 0;          // of the head in c.buffer; 0 with no denial: nothing was asked
  std::optional<denial> refused;
};

// Reads until the end of the request head, within header_limit and header_timeout. The deadline
// races each read rather than closing the socket (as a beast stream's timeout would), so a
// slow client still gets its 400.
asio::awaitable<head_read> read_head(state& st, connection& c) {
  using namespace asio::experimental::awaitable_operators;
  head_scanner scanner;
  asio::steady_timer deadline(c.client.get_executor());
  deadline.expires_after(st.options.header_timeout);
  const std::size_t limit = st.options.header_limit;
  while (!scanner.end()) {
    auto space = c.buffer.prepare(std::min<std::size_t>(4096, limit + 4 - c.buffer.size()));
    auto reading = c.client.socket().async_read_some(space, use_tuple);
    auto expiring = deadline.async_wait(use_tuple);
    auto race = std::move(reading) || std::move(expiring);
    auto won = co_await std::move(race);
    if (c.closing()) co_return head_read{};
    if (won.index() == 1) {
      if (c.buffer.size() == 0) co_return head_read{};
      co_return head_read{0, denial{400, "request head timed out", "the request head did not arrive in time"}};
    }
    auto [ec, n] = std::get<0>(won);
    c.buffer.commit(n);
    if (ec) {
      if (c.buffer.size() == 0) co_return head_read{};
      co_return head_read{0, denial{400, "request head cut short: " + ec.message(), "incomplete request head"}};
    }
    auto data = static_cast<const char*>(c.buffer.data().data());
    if (auto problem = scanner.scan(std::string_view(data, c.buffer.size())))
      co_return head_read{0, denial{400, *problem, "malformed request head"}};
    if (scanner.end() ? *scanner.end() > limit : c.buffer.size() > limit) co_return head_read{0, too_large(limit)};
  }
  co_return head_read{*scanner.end(), std::nullopt};
}

// Parses the head read whole by read_head; what follows it stays in c.buffer.
std::optional<denial> parse_head(connection& c, std::size_t length, head_parser& parser) {
  parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(length, UINT32_MAX)));
  boost::system::error_code ec;
  parser.put(asio::buffer(c.buffer.data(), length), ec);
  c.buffer.consume(length);
  if (ec || !parser.is_header_done()) return denial{400, "malformed request: " + ec.message(), "malformed request"};
  return std::nullopt;
}

// Whether the connection comes from where the sandbox's container is now (see sandbox_egress).
bool from_current_address(connection& c, const sandbox_egress& sandbox) {
  if (sandbox.state != "started" || sandbox.address.empty()) return false;
  boost::system::error_code ec;
  auto peer = c.peer;
  if (peer.is_unspecified()) return false;
  if (peer.is_v6() && peer.to_v6().is_v4_mapped()) peer = asio::ip::make_address_v4(asio::ip::v4_mapped, peer.to_v6());
  auto expected = asio::ip::make_address(sandbox.address, ec);
  return !ec && peer == expected;
}

// The sandbox the credential names (407 otherwise). Unknown ids and wrong secrets take the same
// path, hashing included, so neither is told apart by the answer.
result<sandbox_egress> authenticate(state& st, connection& c, const bhttp::request_header<>& head, egress_event& ev) {
  if (c.proven_sandbox) {  // a link home: its door proved the sandbox, a credential would add nothing
    ev.sandbox_id = *c.proven_sandbox;
    auto found = st.directory.find(*c.proven_sandbox);
    if (!found || found->state != "started") return make_error(errc::unauthenticated, "sandbox not started");
    ev.org_id = found->org_id;
    return std::move(*found);
  }
  auto field = head.find(bhttp::field::proxy_authorization);
  if (field == head.end()) return make_error(errc::unauthenticated, "no credential");
  if (head.count(bhttp::field::proxy_authorization) > 1) return make_error(errc::unauthenticated, "two credentials");
  auto credentials = parse_proxy_authorization(field->value());
  if (!credentials) return make_error(errc::unauthenticated, "malformed credential");
  ev.sandbox_id = credentials->sandbox_id;  // claimed, not proven: logged sanitized
  auto found = st.directory.find(credentials->sandbox_id);
  auto given = sha256_hex(credentials->secret);
  if (!found) return make_error(errc::unauthenticated, "unknown sandbox");
  ev.org_id = found->org_id;
  std::string expected = found->secret_sha256_hex;
  for (auto& ch : expected) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));  // as sha256_hex
  if (!constant_time_equal(given, expected))
    return make_error(errc::unauthenticated, "wrong secret");
  if (!from_current_address(c, *found)) return make_error(errc::unauthenticated, "source address");
  return std::move(*found);
}

asio::awaitable<result<addresses>> resolve_without_throwing(name_resolver& resolver, const std::string& host) {
  try {
    auto lookup = resolver.resolve(host);
    co_return co_await std::move(lookup);
  } catch (const std::exception& e) {
    co_return make_error(errc::internal, std::string("the resolver failed: ") + e.what());
  }
}

// The resolved addresses the policy permits, in the resolver's order (at most max_addresses).
asio::awaitable<std::variant<addresses, denial>> checked_addresses(state& st, connection& c, const std::string& host) {
  using namespace asio::experimental::awaitable_operators;
  if (c.closing()) co_return closed_under(c);
  auto lookup = resolve_without_throwing(st.resolver, host);
  auto closed = c.until_closed();
  auto race = std::move(lookup) || std::move(closed);
  auto won = co_await std::move(race);
  if (won.index() == 1 || c.closing()) co_return closed_under(c);
  auto& resolved = std::get<0>(won);
  if (!resolved) co_return denial{502, resolved.err().message, "cannot resolve " + host};
  addresses permitted;
  std::string refused, classes;
  for (const auto& a : *resolved) {
    if (auto why = st.policy.refuse_reason(a)) {
      refused += (refused.empty() ? "" : ", ") + *why;
      std::string cls(to_string(classify(a)));
      if (classes.find(cls) == std::string::npos) classes += (classes.empty() ? "" : ", ") + cls;
    } else if (permitted.size() < st.options.max_addresses) {
      permitted.push_back(a);
    }
  }
  if (permitted.empty())
    co_return denial{403, "refused address: " + refused, "the destination's address is not allowed (" + classes + ")",
                     std::string(refused_address)};
  co_return permitted;
}

// Connects c.upstream to the first checked address that answers; never to anything else.
asio::awaitable<std::variant<asio::ip::address, denial>> dial(state& st, connection& c, const addresses& checked,
                                                              unsigned short port) {
  bool all_timed_out = true;
  std::string failures;
  for (const auto& a : checked) {
    boost::system::error_code ignored;
    c.upstream.socket().close(ignored);  // the next address may be of the other family
    tcp::endpoint endpoint(a, port);
    c.upstream.expires_after(st.options.connect_timeout);
    auto [ec] = co_await c.upstream.async_connect(endpoint, use_tuple);
    c.upstream.expires_never();
    if (c.closing()) co_return closed_under(c);
    if (!ec) {
      c.upstream.socket().set_option(tcp::no_delay(true), ignored);
      co_return a;
    }
    if (ec != beast::error::timeout) all_timed_out = false;
    failures += (failures.empty() ? "" : ", ") + a.to_string() + ": " + ec.message();
  }
  if (all_timed_out) co_return denial{504, "connect timed out: " + failures, "the destination did not answer in time"};
  co_return denial{502, "connect failed: " + failures, "cannot connect to the destination"};
}

std::string end_reason(const connection& c, const tunnel& t) {
  if (c.closed_because()) return *c.closed_because();
  if (t.idle) return "idle timeout";
  return t.reset ? "reset" : "closed";
}

// Sends what must precede the splice (our 200, or the rewritten head), then the bytes the
// client sent past its head, then splices. Reports the allowed tunnel at its end.
asio::awaitable<void> relay(state& st, connection& c, egress_event& ev, const egress_target& target,
                            const bhttp::request_header<>& head) {
  bool forward = target.mode == egress_target::kind::forward;
  tunnel t(c.client.socket(), c.upstream.socket(), st.options.idle_timeout, forward);
  std::string opening = forward ? forward_head(head, target) : std::string(connect_established);
  auto& first_to = forward ? c.upstream : c.client;
  first_to.expires_after(st.options.idle_timeout);
  auto [ec, n] = co_await asio::async_write(first_to, asio::buffer(opening), use_tuple);
  if (forward) t.bytes_out += n;
  if (!ec && c.buffer.size() > 0) {
    c.upstream.expires_after(st.options.idle_timeout);
    auto [lec, ln] = co_await asio::async_write(c.upstream, c.buffer.data(), use_tuple);
    c.buffer.consume(ln);
    t.bytes_out += ln;
    ec = lec;
  }
  c.client.expires_never();
  c.upstream.expires_never();
  if (ec)
    t.reset = true;
  else if (!c.closing()) {
    auto splicing = splice(t);
    co_await std::move(splicing);
  }
  ev.decision = "allow";
  ev.status = forward ? response_status(t.response_start) : 200;
  ev.reason = end_reason(c, t);
  ev.bytes_in = t.bytes_in;
  ev.bytes_out = t.bytes_out;
  report(st, c, ev);
}

// From the authenticated request holding its tunnel slot on: the allowlist, the addresses. A
// denial, or nullopt once the allowed tunnel has been relayed and reported.
asio::awaitable<std::optional<denial>> proceed(state& st, connection& c, egress_event& ev,
                                               const sandbox_egress& sandbox, const egress_target& target,
                                               const bhttp::request_header<>& head) {
  if (!host_allowed(sandbox.allowlist, target.host))
    co_return denial{403, "host not in the allowlist", "this sandbox may not reach " + target.host,
                     std::string(not_on_allowlist)};
  auto checking = checked_addresses(st, c, target.host);
  auto checked = co_await std::move(checking);
  if (auto* d = std::get_if<denial>(&checked)) co_return std::move(*d);
  auto dialing = dial(st, c, std::get<addresses>(checked), target.where.port);
  auto dialed = co_await std::move(dialing);
  if (auto* d = std::get_if<denial>(&dialed)) co_return std::move(*d);
  ev.address = std::get<asio::ip::address>(dialed).to_string();
  auto relaying = relay(st, c, ev, target, head);
  co_await std::move(relaying);
  co_return std::nullopt;
}

// The authenticated connection trades its pending slot for a tunnel slot, or is refused
// (429/503) and keeps the pending slot while its answer goes out.
std::optional<denial> take_tunnel_slot(state& st, connection& c) {
  int status = st.admission.take_tunnel(c.sandbox_id);
  if (status == 429) return denial{429, "too many open tunnels", "too many open connections for this sandbox"};
  if (status != 0)
    return denial{503, "too many open tunnels on the proxy", "the proxy has too many open connections; try again"};
  c.holds_tunnel = true;
  if (c.pending_source) st.admission.release_pending(*std::exchange(c.pending_source, std::nullopt));
  return std::nullopt;
}

// The request head, read and checked up to its target. A denial, or nullopt when there is
// nothing (more) to answer.
asio::awaitable<std::optional<denial>> handle(state& st, connection& c, egress_event& ev) {
  auto reading = read_head(st, c);
  auto got = co_await std::move(reading);
  if (got.refused) co_return std::move(got.refused);
  if (got.length == 0) co_return std::nullopt;  // asked nothing: no answer, no decision
  head_parser parser;
  if (auto bad = parse_head(c, got.length, parser)) co_return bad;
  const auto& head = parser.get();
  if (head.version() != 10 && head.version() != 11)
    co_return denial{400, "unsupported HTTP version", "only HTTP/1.0 and HTTP/1.1 are proxied"};
  // The head scanner refused these already; checked again on the parsed values, which are
  // what a forwarded request carries upstream.
  if (!header_values_clean(head))
    co_return denial{400, "control character in a header value", "malformed header value"};
  auto sandbox = authenticate(st, c, head, ev);
  if (!sandbox) co_return denial{407, sandbox.err().message, "proxy authentication required"};
  c.sandbox_id = sandbox->sandbox_id;
  if (auto full = take_tunnel_slot(st, c)) co_return full;
  auto target = parse_request_target(head.method() == bhttp::verb::connect, head.target());
  if (!target) co_return denial{400, target.err().message, target.err().message};
  ev.host = target->host;
  ev.port = target->where.port;
  auto proceeding = proceed(st, c, ev, *sandbox, *target, head);
  co_return co_await std::move(proceeding);
}

asio::awaitable<void> drain_input(const state& st, connection& c) {
  boost::system::error_code ignored;
  c.client.socket().shutdown(asio::socket_base::shutdown_send, ignored);
  std::vector<char> sink(16 * 1024);
  std::size_t total = 0;
  c.client.expires_after(std::min(st.options.header_timeout, max_drain_time));
  while (total < max_drained && !c.closing()) {
    auto [ec, n] = co_await c.client.async_read_some(asio::buffer(sink), use_tuple);
    if (ec) break;
    total += n;
  }
}

asio::ip::address peer_of(const tcp::socket& socket) {
  boost::system::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  return ec ? asio::ip::address() : endpoint.address();
}

}  // namespace

connection::connection(tcp::socket socket)
    : peer(peer_of(socket)),
      client(std::move(socket)),
      upstream(client.get_executor()),
      closed_signal_(client.get_executor()) {
  closed_signal_.expires_at(asio::steady_timer::time_point::max());
}

connection::connection(http::any_stream link, std::string sandbox)
    : client(std::move(link)),
      upstream(client.get_executor()),
      proven_sandbox(std::move(sandbox)),
      closed_signal_(client.get_executor()) {
  closed_signal_.expires_at(asio::steady_timer::time_point::max());
}

void connection::close(std::string why) {
  if (closed_because_) return;
  closed_because_ = std::move(why);
  client.close();
  upstream.close();
  closed_signal_.cancel();
}

asio::awaitable<void> connection::until_closed() {
  if (closing()) co_return;
  co_await closed_signal_.async_wait(use_tuple);
}

namespace {

// The decision as sandfort_egress_decisions_total names it: one word per answer the proxy gives.
const char* decision_label(const egress_event& ev) {
  if (ev.decision == "allow") return "allowed";
  switch (ev.status) {
    case 0: return "client_gone";         // closed under the request before an answer
    case 400: return "bad_request";
    case 403: return "denied";            // host not in the allowlist, or a refused address
    case 407: return "unauthenticated";
    case 429: return "rate_limited";      // the sandbox's tunnels are at their cap
    case 503: return "over_capacity";     // the proxy's tunnels are at their cap
    case 502:
    case 504: return "upstream_error";    // cannot resolve, connect or get an answer
    default: return "denied";
  }
}

}  // namespace

void report(state& st, const connection& c, egress_event& ev) {
  ev.duration = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - c.started);
  spdlog::info("{}", decision_line(ev));
  metrics::egress_decisions().inc({decision_label(ev)});
  bool allowed = ev.decision == "allow";
  auto count = [&](egress_proxy::traffic& t) {
    t.bytes_in += ev.bytes_in;
    t.bytes_out += ev.bytes_out;
    ++(allowed ? t.allowed : t.denied);
  };
  count(st.total);
  if (!c.sandbox_id.empty() && !c.forget_traffic) count(st.per_sandbox[c.sandbox_id]);
  if (!st.on_decision) return;
  try {
    st.on_decision(ev);
  } catch (const std::exception& e) {
    spdlog::warn("egress proxy: the decision callback failed: {}", e.what());
  }
}

namespace {

asio::awaitable<void> serve_connection(std::shared_ptr<state> st, connection& c, std::string source) {
  auto entry = st->connections.insert(st->connections.end(), &c);
  struct unregister {
    state& st;
    connection& c;
    std::list<connection*>::iterator it;
    ~unregister() {
      st.connections.erase(it);
      if (c.pending_source) st.admission.release_pending(*c.pending_source);
      if (c.holds_tunnel) st.admission.release_tunnel(c.sandbox_id);
    }
  } drop{*st, c, entry};
  if (st->stopping) co_return;
  try {
    egress_event ev;
    ev.source = std::move(source);
    auto work = handle(*st, c, ev);
    auto refused = co_await std::move(work);
    if (refused) {
      auto answer = deny(*st, c, ev, std::move(*refused));
      co_await std::move(answer);
    }
    if (c.linger && !c.closing()) {
      auto drain = drain_input(*st, c);
      co_await std::move(drain);
    }
  } catch (const std::exception& e) {
    spdlog::warn("egress proxy: connection failed: {}", e.what());
  }
}

}  // namespace

asio::awaitable<void> serve(std::shared_ptr<state> st, tcp::socket socket, asio::ip::address source) {
  connection c(std::move(socket));
  c.pending_source = source;
  auto serving = serve_connection(std::move(st), c, source.to_string());  // not a temporary: GCC 12
  co_await std::move(serving);
}

asio::awaitable<void> serve_link(std::shared_ptr<state> st, http::any_stream link, std::string sandbox_id) {
  connection c(std::move(link), sandbox_id);
  auto serving = serve_connection(std::move(st), c, "link:" + sandbox_id);  // not a temporary: GCC 12
  co_await std::move(serving);
}

}  // namespace sandfort::proxy::detail
