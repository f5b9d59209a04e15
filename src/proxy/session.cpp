// One connection, one request, one decision: read the head, authenticate, check the target,
// resolve, check every address, dial exactly those, relay.
#include "state.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <spdlog/spdlog.h>
#include <cctype>
#include <utility>
#include <variant>

#include "sandfort/core/base64.hpp"
#include "sandfort/crypto/digest.hpp"
#include "sandfort/metrics/catalog.hpp"
#include "sandfort/proxy/injection.hpp"
#include "sandfort/proxy/request.hpp"
#include "sandfort/proxy/rules.hpp"
#include "sandfort/secrets/tls_interception.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "header_names.hpp"
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
// slow client still gets its 400. `first_byte_wait`: how long a kept-alive connection may stay
// silent before its next request begins (header_timeout runs from that request's first byte).
asio::awaitable<head_read> read_head(state& st, connection& c, std::chrono::milliseconds first_byte_wait) {
  using namespace asio::experimental::awaitable_operators;
  head_scanner scanner;
  asio::steady_timer deadline(c.client.get_executor());
  bool waiting_for_first_byte = c.buffer.size() == 0 && first_byte_wait > st.options.header_timeout;
  deadline.expires_after(waiting_for_first_byte ? first_byte_wait : st.options.header_timeout);
  const std::size_t limit = st.options.header_limit;
  // A pipelined request may be here already, whole or in part.
  if (c.buffer.size() > 0) {
    auto data = static_cast<const char*>(c.buffer.data().data());
    if (auto problem = scanner.scan(std::string_view(data, c.buffer.size())))
      co_return head_read{0, denial{400, *problem, "malformed request head"}};
    if (scanner.end() ? *scanner.end() > limit : c.buffer.size() > limit) co_return head_read{0, too_large(limit)};
  }
  while (!scanner.end()) {
    auto space = c.buffer.prepare(std::min<std::size_t>(4096, limit + 4 - c.buffer.size()));
    if (c.intercepted) {
      // Through the TLS layer, with the stream's own deadline (a TLS read is not raced: cancelling
      // one midway would leave the layer unusable). A slow client is closed rather than answered.
      c.client.expires_after(waiting_for_first_byte ? first_byte_wait : st.options.header_timeout);
      auto [ec, n] = co_await c.client.async_read_some(space, use_tuple);
      c.client.expires_never();
      if (c.closing()) co_return head_read{};
      c.buffer.commit(n);
      if (n > 0) waiting_for_first_byte = false;
      if (ec) {
        if (c.buffer.size() == 0) co_return head_read{};
        co_return head_read{0, denial{0, "request head cut short: " + ec.message(), "incomplete request head"}};
      }
      auto got = std::string_view(static_cast<const char*>(c.buffer.data().data()), c.buffer.size());
      if (auto problem = scanner.scan(got)) co_return head_read{0, denial{400, *problem, "malformed request head"}};
      if (scanner.end() ? *scanner.end() > limit : c.buffer.size() > limit) co_return head_read{0, too_large(limit)};
      continue;
    }
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
    if (waiting_for_first_byte && n > 0) {
      waiting_for_first_byte = false;
      deadline.expires_after(st.options.header_timeout);
    }
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
  if (!ec && !forward && !c.upstream_early.empty()) {
    auto early = std::exchange(c.upstream_early, std::string());
    c.client.expires_after(st.options.idle_timeout);
    auto [eec, en] = co_await asio::async_write(c.client, asio::buffer(early), use_tuple);
    t.bytes_in += en;
    ec = eec;
  }
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

// What a refusal by the egress rules says on its status line.
constexpr std::string_view refused_by_rule = "refused by the sandbox's egress rules";
constexpr std::string_view needs_interception = "the egress rule needs TLS interception";

denial rule_denial(const egress_verdict& v) {
  if (v.rule.empty())
    return denial{403, "host not in the allowlist", v.message, std::string(not_on_allowlist)};
  return denial{403, "refused by " + v.rule, v.message,
                std::string(v.needs_interception ? needs_interception : refused_by_rule)};
}

// Where a forwarded request's body ends: nullopt for a chunked one (its end is found only by
// parsing it, so it is relayed as before: until the upstream is done, and the connection ends).
std::optional<std::uint64_t> request_body_length(const head_parser& parser) {
  if (parser.chunked() || parser.get().find(bhttp::field::transfer_encoding) != parser.get().end())
    return std::nullopt;
  return parser.content_length().value_or(0);
}

// Copies exactly `length` bytes from `from` (what `buffered` holds first) to `to`.
asio::awaitable<bool> copy_exactly(state& st, http::any_stream& from, beast::flat_buffer& buffered,
                                   http::any_stream& to, std::uint64_t length, std::uint64_t& count) {
  while (length > 0) {
    if (buffered.size() == 0) {
      from.expires_after(st.options.idle_timeout);
      auto space = buffered.prepare(static_cast<std::size_t>(std::min<std::uint64_t>(length, 64 * 1024)));
      auto [ec, n] = co_await from.async_read_some(space, use_tuple);
      from.expires_never();
      if (ec) co_return false;
      buffered.commit(n);
    }
    auto take = static_cast<std::size_t>(std::min<std::uint64_t>(length, buffered.size()));
    to.expires_after(st.options.idle_timeout);
    auto [ec, n] = co_await asio::async_write(to, asio::buffer(buffered.data().data(), take), use_tuple);
    to.expires_never();
    buffered.consume(n);
    count += n;
    length -= n;
    if (ec) co_return false;
  }
  co_return true;
}

// Copies from `from` (what `buffered` holds first) to `to` until `from` ends.
asio::awaitable<bool> copy_to_end(state& st, http::any_stream& from, beast::flat_buffer& buffered,
                                  http::any_stream& to, std::uint64_t& count) {
  for (;;) {
    if (buffered.size() > 0) {
      to.expires_after(st.options.idle_timeout);
      auto [ec, n] = co_await asio::async_write(to, buffered.data(), use_tuple);
      to.expires_never();
      buffered.consume(n);
      count += n;
      if (ec) co_return false;
    }
    from.expires_after(st.options.idle_timeout);
    auto [ec, n] = co_await from.async_read_some(buffered.prepare(64 * 1024), use_tuple);
    from.expires_never();
    if (ec == asio::error::eof) co_return true;
    if (ec) co_return false;
    buffered.commit(n);
  }
}

constexpr std::size_t response_head_limit = 64 * 1024;

struct response_head {
  std::unique_ptr<bhttp::response_parser<bhttp::empty_body>> parser;
  bool bad = false;  // the upstream's head could not be read or parsed
};

// Reads the upstream's response head into `buffer`; what follows it stays there.
asio::awaitable<void> read_response_head(state& st, connection& c, beast::flat_buffer& buffer, bool head_request,
                                         response_head& out) {
  head_scanner scanner;
  while (!scanner.end()) {
    c.upstream.expires_after(st.options.idle_timeout);
    auto [ec, n] = co_await c.upstream.async_read_some(buffer.prepare(16 * 1024), use_tuple);
    c.upstream.expires_never();
    buffer.commit(n);
    auto data = std::string_view(static_cast<const char*>(buffer.data().data()), buffer.size());
    if (scanner.scan(data) || (!scanner.end() && (ec || buffer.size() > response_head_limit))) {
      out.bad = true;
      co_return;
    }
  }
  out.parser = std::make_unique<bhttp::response_parser<bhttp::empty_body>>();
  out.parser->header_limit(static_cast<std::uint32_t>(response_head_limit));
  if (head_request) out.parser->skip(true);
  boost::system::error_code ec;
  out.parser->put(asio::buffer(buffer.data().data(), *scanner.end()), ec);
  if ((ec && ec != bhttp::error::need_more) || !out.parser->is_header_done()) {
    out.bad = true;
    co_return;
  }
  buffer.consume(*scanner.end());
}

// One forwarded request, allowed and dialed: its head and body upstream, the answer back. Sets
// keep_alive when the client may send its next request on this connection.
asio::awaitable<void> forward_one(state& st, connection& c, egress_event& ev, const egress_target& target,
                                  const head_parser& request, bool& keep_alive) {
  const auto& head = request.get();
  keep_alive = false;
  std::uint64_t out_bytes = 0, in_bytes = 0;
  int status = 0;
  bool failed = false;
  auto body = request_body_length(request);
  auto opening = forward_head(head, target);
  c.upstream.expires_after(st.options.idle_timeout);
  auto [ec, n] = co_await asio::async_write(c.upstream, asio::buffer(opening), use_tuple);
  c.upstream.expires_never();
  out_bytes += n;
  if (ec) failed = true;
  if (!failed && body) {
    auto sending = copy_exactly(st, c.client, c.buffer, c.upstream, *body, out_bytes);
    failed = !co_await std::move(sending);
  }
  beast::flat_buffer answer;
  if (!c.upstream_early.empty()) {
    auto early = std::exchange(c.upstream_early, std::string());
    answer.commit(asio::buffer_copy(answer.prepare(early.size()), asio::buffer(early)));
  }
  bool head_request = head.method() == bhttp::verb::head;
  // 1xx answers (100 Continue) pass through as they are; the final answer follows.
  response_head got;
  while (!failed && !c.closing()) {
    got = response_head{};
    auto reading = read_response_head(st, c, answer, head_request, got);
    co_await std::move(reading);
    if (got.bad || !got.parser) break;
    status = static_cast<int>(got.parser->get().result_int());
    if (status >= 200 || status == 101) break;
    auto interim = response_head_for_client(got.parser->get(), true);
    c.client.expires_after(st.options.idle_timeout);
    auto [iec, in] = co_await asio::async_write(c.client, asio::buffer(interim), use_tuple);
    c.client.expires_never();
    in_bytes += in;
    if (iec) failed = true;
  }
  // 101 (an upgrade the upstream made although Upgrade was not forwarded) has no framing: its
  // bytes are relayed to the end, and the connection ends with them.
  if (!failed && !c.closing() && got.parser && !got.bad && (status >= 200 || status == 101)) {
    const auto& response = got.parser->get();
    bool no_body = head_request || status == 204 || status == 304;
    if (status == 101) no_body = false;
    auto length = got.parser->content_length();
    bool chunked = got.parser->chunked();
    bool framed = status != 101 && (no_body || length || chunked);
    bool client_keeps = head.keep_alive() && head.version() == 11 && body.has_value();
    keep_alive = framed && client_keeps;
    auto rewritten = response_head_for_client(response, keep_alive);
    c.client.expires_after(st.options.idle_timeout);
    auto [wec, wn] = co_await asio::async_write(c.client, asio::buffer(rewritten), use_tuple);
    c.client.expires_never();
    in_bytes += wn;
    bool ok = !wec;
    if (ok && !no_body) {
      if (length && !chunked && status != 101) {
        auto copying = copy_exactly(st, c.upstream, answer, c.client, *length, in_bytes);
        ok = co_await std::move(copying);
      } else {
        auto copying = copy_to_end(st, c.upstream, answer, c.client, in_bytes);
        ok = co_await std::move(copying);
      }
    }
    if (!ok) keep_alive = false, failed = true;
  } else if (!failed && !c.closing() && got.bad) {
    // Not a head we can read: its bytes go to the client as they came, and the connection ends.
    auto copying = copy_to_end(st, c.upstream, answer, c.client, in_bytes);
    failed = !co_await std::move(copying);
  }
  boost::system::error_code ignored;
  c.upstream.socket().close(ignored);
  ev.decision = "allow";
  ev.status = status;
  ev.reason = c.closed_because() ? *c.closed_because() : failed ? "reset" : "closed";
  ev.bytes_in = in_bytes;
  ev.bytes_out = out_bytes;
  report(st, c, ev);
}

// The CONNECT sandfortd sends the upstream proxy: the destination by name (the organization's
// proxy may have rules of its own by name), with the configured Basic credentials.
std::string upstream_connect_head(const upstream_proxy_options& up, const egress_target& target) {
  std::string where = (target.where.ipv6_literal ? "[" + target.host + "]" : target.host) + ":" +
                      std::to_string(target.where.port);
  std::string out = "CONNECT " + where + " HTTP/1.1\r\nHost: " + where + "\r\n";
  if (!up.username.empty())
    out += "Proxy-Authorization: Basic " + base64_encode(up.username + ":" + up.password) + "\r\n";
  return out + "\r\n";
}

// Connects c.upstream to the upstream proxy and opens a tunnel through it to the target, which
// the policy allowed already. The address in the answer is the upstream proxy's.
asio::awaitable<std::variant<asio::ip::address, denial>> dial_through_upstream(state& st, connection& c,
                                                                               const upstream_proxy_options& up,
                                                                               const egress_target& target) {
  auto lookup = resolve_without_throwing(st.resolver, up.host);
  auto resolved = co_await std::move(lookup);
  if (c.closing()) co_return closed_under(c);
  if (!resolved || resolved->empty())
    co_return denial{502, "cannot resolve the upstream proxy " + up.host, "cannot reach the upstream proxy"};
  auto dialing = dial(st, c, *resolved, up.port);
  auto dialed = co_await std::move(dialing);
  if (auto* d = std::get_if<denial>(&dialed)) {
    d->reason = "upstream proxy: " + d->reason;
    d->message = "cannot reach the upstream proxy";
    co_return std::move(*d);
  }
  auto opening = upstream_connect_head(up, target);
  c.upstream.expires_after(st.options.connect_timeout);
  auto [ec, n] = co_await asio::async_write(c.upstream, asio::buffer(opening), use_tuple);
  c.upstream.expires_never();
  if (c.closing()) co_return closed_under(c);
  if (ec) co_return denial{502, "upstream proxy: " + ec.message(), "the upstream proxy failed"};
  beast::flat_buffer answer;
  response_head got;
  auto reading = read_response_head(st, c, answer, true, got);
  co_await std::move(reading);
  if (c.closing()) co_return closed_under(c);
  if (got.bad || !got.parser) co_return denial{502, "upstream proxy: unreadable answer", "the upstream proxy failed"};
  auto status = got.parser->get().result_int();
  if (status < 200 || status > 299) {
    co_return denial{502, "upstream proxy answered " + std::to_string(status),
                     "the upstream proxy refused the connection (" + std::to_string(status) + ")"};
  }
  c.upstream_early.assign(static_cast<const char*>(answer.data().data()), answer.size());
  co_return std::get<asio::ip::address>(dialed);
}

struct next_request {
  bool keep_alive = false;  // the connection may carry another request
};

// Whether a CONNECT is intercepted (docs/secrets.md): to a host one of the sandbox's secrets is
// bound to (and the host is allowed), or to a host only method/path rules allow; when the
// organization has an interception CA. Host names only: a leaf never names an IP address.
std::optional<interception_authority> interception_for(state& st, const sandbox_egress& sandbox,
                                                       const egress_target& target, const egress_verdict& verdict) {
  if (!st.interception || !st.upstream_context || target.where.ipv6_literal) return std::nullopt;
  boost::system::error_code literal;
  asio::ip::make_address(target.host, literal);
  if (!literal) return std::nullopt;
  bool wanted = verdict.needs_interception || (verdict.allowed && any_bound_to(sandbox.secrets, target.host));
  if (!wanted) return std::nullopt;
  return st.interception->authority(sandbox.org_id);
}

asio::awaitable<void> serve_intercepted(state& st, connection& c, const egress_event& base,
                                        const egress_target& target);

// From the authenticated request holding its tunnel slot on: the egress rules, the addresses. A
// denial, or nullopt once the allowed request has been relayed and reported.
asio::awaitable<std::optional<denial>> proceed(state& st, connection& c, egress_event& ev,
                                               const sandbox_egress& sandbox, const egress_target& target,
                                               const head_parser& request, next_request& next) {
  const auto& head = request.get();
  bool forward = target.mode == egress_target::kind::forward;
  auto rules = sandbox.rule_set();
  auto verdict = forward ? decide_request(rules, target.host, head.method_string(), target.origin_target)
                         : decide_tunnel(rules, target.host);
  auto authority = forward ? std::nullopt : interception_for(st, sandbox, target, verdict);
  if (!verdict.allowed && !(verdict.needs_interception && authority)) co_return rule_denial(verdict);
  // The client's TLS must start after our 200: bytes sent before it cannot be intercepted.
  if (authority && c.buffer.size() > 0)
    co_return denial{400, "bytes before the CONNECT's answer", "send nothing before the CONNECT is answered"};
  auto checking = checked_addresses(st, c, target.host);
  auto checked = co_await std::move(checking);
  if (auto* d = std::get_if<denial>(&checked)) co_return std::move(*d);
  std::variant<asio::ip::address, denial> dialed;
  if (st.options.upstream_proxy) {
    auto dialing = dial_through_upstream(st, c, *st.options.upstream_proxy, target);
    dialed = co_await std::move(dialing);
  } else {
    auto dialing = dial(st, c, std::get<addresses>(checked), target.where.port);
    dialed = co_await std::move(dialing);
  }
  if (auto* d = std::get_if<denial>(&dialed)) co_return std::move(*d);
  ev.address = std::get<asio::ip::address>(dialed).to_string();
  if (authority) {
    if (!c.upstream_early.empty())
      co_return denial{502, "the upstream spoke before TLS", "the destination did not answer as a TLS server"};
    c.client.expires_after(st.options.header_timeout);
    auto [wec, wn] = co_await asio::async_write(c.client, asio::buffer(connect_established), use_tuple);
    c.client.expires_never();
    if (wec || c.closing()) co_return closed_under(c);
    auto intercepting = secrets::intercept_in_place(c.client, c.upstream, target.host, st.options.connect_timeout,
                                                    *authority->leaves, *authority->ca, st.upstream_context);
    auto done = co_await std::move(intercepting);
    if (c.closing()) co_return closed_under(c);
    if (!done) {
      // Answered 200 already: the client learns it from its failed handshake; the log says why.
      c.close("interception: " + done.err().message);
      co_return denial{502, "interception: " + done.err().message, {}};
    }
    c.client_tls = std::move(done->client_context);
    c.upstream_tls = std::move(done->upstream_context);
    c.intercepted = true;
    auto serving = serve_intercepted(st, c, ev, target);
    co_await std::move(serving);
    co_return std::nullopt;
  }
  if (forward && request_body_length(request)) {
    bool keep_alive = false;
    auto forwarding = forward_one(st, c, ev, target, request, keep_alive);
    co_await std::move(forwarding);
    next.keep_alive = keep_alive;
    co_return std::nullopt;
  }
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

// The sandbox as it is now, for a later request on an authenticated connection: its policy may
// have changed, and a sandbox that stopped or went away gets nothing more.
std::optional<sandbox_egress> current_sandbox(state& st, const connection& c) {
  auto found = st.directory.find(c.sandbox_id);
  if (!found || found->state != "started") return std::nullopt;
  return found;
}

// Reads and parses one request head into `parser`. A denial; or nullopt with the parser set
// when a request came, unset when the client asked nothing.
asio::awaitable<std::optional<denial>> read_request(state& st, connection& c, std::optional<head_parser>& parser,
                                                    std::chrono::milliseconds first_byte_wait) {
  auto reading = read_head(st, c, first_byte_wait);
  auto got = co_await std::move(reading);
  if (got.refused) co_return std::move(got.refused);
  if (got.length == 0) co_return std::nullopt;  // asked nothing: no answer, no decision
  parser.emplace();
  if (auto bad = parse_head(c, got.length, *parser)) co_return bad;
  const auto& head = parser->get();
  if (head.version() != 10 && head.version() != 11)
    co_return denial{400, "unsupported HTTP version", "only HTTP/1.0 and HTTP/1.1 are proxied"};
  // The head scanner refused these already; checked again on the parsed values, which are
  // what a forwarded request carries upstream.
  if (!header_values_clean(head))
    co_return denial{400, "control character in a header value", "malformed header value"};
  co_return std::nullopt;
}

// Reads and drops `length` bytes of the client's request body (a refused request on a kept-alive
// intercepted connection).
asio::awaitable<bool> skip_body(state& st, connection& c, std::uint64_t length) {
  while (length > 0) {
    if (c.buffer.size() == 0) {
      c.client.expires_after(st.options.idle_timeout);
      auto [ec, n] = co_await c.client.async_read_some(c.buffer.prepare(16 * 1024), use_tuple);
      c.client.expires_never();
      if (ec) co_return false;
      c.buffer.commit(n);
    }
    auto take = static_cast<std::size_t>(std::min<std::uint64_t>(length, c.buffer.size()));
    c.buffer.consume(take);
    length -= take;
  }
  co_return true;
}

// The hop-by-hop headers of a response (and those its Connection names) are dropped; with
// replacements, every value of a secret in a header becomes its placeholder.
void clean_response_head(bhttp::response_header<>& res, const replacements& r) {
  auto named = connection_tokens(res);
  std::vector<std::pair<std::string, std::string>> kept;
  for (const auto& field : res) {
    auto name = ascii_lower(field.name_string());
    if (name == "connection" || name == "keep-alive" || name == "proxy-connection") continue;
    if (!is_framing(name) && std::find(named.begin(), named.end(), name) != named.end()) continue;
    kept.emplace_back(std::string(field.name_string()),
                      r.empty() ? std::string(field.value()) : replace_values(field.value(), r));
  }
  res.clear();
  for (const auto& [name, value] : kept) res.insert(name, value);
}

constexpr std::size_t relay_piece = 64 * 1024;

// One response of an intercepted connection, from the upstream to the client. Its body is
// relayed in pieces (never held whole); with replacements it is rewritten on the way and sent
// chunked, since its length changes. Sets keep_alive when the connection may carry another
// request. False when the response could not be relayed (the connection ends).
asio::awaitable<bool> relay_intercepted_response(state& st, connection& c, egress_event& ev,
                                                 const bhttp::request<bhttp::empty_body>& request, const replacements& r,
                                                 bool injected, bool& keep_alive) {
  using response_parser = bhttp::response_parser<bhttp::buffer_body>;
  keep_alive = false;
  const bool head_request = request.method() == bhttp::verb::head;
  std::optional<response_parser> parser;
  int status = 0;
  for (;;) {
    parser.emplace();
    parser->header_limit(static_cast<std::uint32_t>(response_head_limit));
    parser->body_limit(boost::none);
    if (head_request) parser->skip(true);
    c.upstream.expires_after(st.options.idle_timeout);
    auto [ec, n] = co_await bhttp::async_read_header(c.upstream, c.upstream_buffer, *parser, use_tuple);
    c.upstream.expires_never();
    if (ec || c.closing()) co_return false;
    status = static_cast<int>(parser->get().result_int());
    if (status >= 200) break;
    if (status == 101) co_return false;  // Upgrade is never forwarded: an upgrade here is not HTTP any more
    auto interim = response_head_for_client(parser->get(), true);
    c.client.expires_after(st.options.idle_timeout);
    auto [iec, in] = co_await asio::async_write(c.client, asio::buffer(interim), use_tuple);
    c.client.expires_never();
    ev.bytes_in += in;
    if (iec) co_return false;
  }
  ev.status = status;
  auto& res = parser->get();
  const bool no_body = head_request || status == 204 || status == 304;
  auto encoding = res[bhttp::field::content_encoding];
  const bool in_clear = encoding.empty() || beast::iequals(encoding, "identity");
  if (injected && !in_clear && !no_body) {
    // The request carried a value; the answer is compressed against Accept-Encoding: identity, so
    // an echo of the value could not be taken out. Refused rather than passed on.
    ev.status = 502;
    ev.reason = "compressed response to an injected request";
    auto refusal = deny_response(502, "the destination compressed its answer to a request carrying a secret",
                                 "compressed answer to a request carrying a secret");
    c.client.expires_after(st.options.idle_timeout);
    co_await asio::async_write(c.client, asio::buffer(refusal), use_tuple);
    c.client.expires_never();
    co_return false;
  }
  const bool rewrite = !r.empty() && in_clear && !no_body;
  keep_alive = request.keep_alive() && request.version() == 11 && parser->keep_alive() && !parser->need_eof();
  clean_response_head(res, in_clear ? r : replacements{});
  if (no_body) {  // the head alone, its framing headers as they came (a serializer would add a body)
    auto bytes = response_head_for_client(res, keep_alive);
    c.client.expires_after(st.options.idle_timeout);
    auto [wec, wn] = co_await asio::async_write(c.client, asio::buffer(bytes), use_tuple);
    c.client.expires_never();
    ev.bytes_in += wn;
    co_return !wec && !c.closing();
  }
  if (rewrite) {
    res.erase(bhttp::field::content_length);
    if (request.version() == 11) {
      res.chunked(true);
    } else {
      res.erase(bhttp::field::transfer_encoding);
      keep_alive = false;
    }
  }
  res.version(request.version());
  res.keep_alive(keep_alive);
  std::optional<stream_rewriter> rewriter;
  if (rewrite) rewriter.emplace(r);
  bhttp::response_serializer<bhttp::buffer_body> serializer(res);
  std::vector<char> piece(relay_piece);
  std::string rewritten;
  for (;;) {
    if (!parser->is_done()) {
      res.body().data = piece.data();
      res.body().size = piece.size();
      c.upstream.expires_after(st.options.idle_timeout);
      auto [ec, n] = co_await bhttp::async_read(c.upstream, c.upstream_buffer, *parser, use_tuple);
      c.upstream.expires_never();
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec || c.closing()) co_return false;
      std::size_t got = piece.size() - res.body().size;
      if (rewriter) {
        rewritten = rewriter->feed(std::string_view(piece.data(), got));
        if (parser->is_done()) rewritten += rewriter->finish();
        res.body().data = rewritten.data();
        res.body().size = rewritten.size();
      } else {
        res.body().data = piece.data();
        res.body().size = got;
      }
      res.body().more = !parser->is_done();
      if (res.body().size == 0) res.body().data = nullptr;  // nothing yet: no empty chunk (it would end the body)
    } else {
      res.body().data = nullptr;
      res.body().size = 0;
      res.body().more = false;
    }
    c.client.expires_after(st.options.idle_timeout);
    auto [wec, wn] = co_await bhttp::async_write(c.client, serializer, use_tuple);
    c.client.expires_never();
    ev.bytes_in += wn;
    if (wec == bhttp::error::need_buffer) wec = {};
    if (wec || c.closing()) co_return false;
    if (serializer.is_done()) break;
  }
  co_return true;
}

// The requests of an intercepted connection (docs/secrets.md), each its own decision as on a
// kept-alive plain-HTTP connection: read in the clear, checked against the sandbox's rules as
// they are now, the placeholders of the secrets bound to the host replaced by their values (looked
// up now: a rotation or a deletion applies to the next request), sent on the one verified upstream
// connection, and the answer relayed with the values taken out.
asio::awaitable<void> serve_intercepted(state& st, connection& c, const egress_event& base,
                                        const egress_target& target) {
  const std::string host_header =
      target.where.port == 443 ? target.host : target.host + ":" + std::to_string(target.where.port);
  int served = 0;
  for (;;) {
    egress_event ev = base;
    ev.intercepted = true;
    c.started = clock::now();
    std::optional<head_parser> parser;
    auto reading = read_request(st, c, parser, served == 0 ? st.options.header_timeout : st.options.idle_timeout);
    auto unreadable = co_await std::move(reading);
    if (unreadable) {
      auto answer = deny(st, c, ev, std::move(*unreadable));
      co_await std::move(answer);
      co_return;
    }
    if (!parser) break;
    ++served;
    auto sandbox = current_sandbox(st, c);
    if (!sandbox) {
      auto answer = deny(st, c, ev, denial{403, "sandbox not started", "the sandbox is not running"});
      co_await std::move(answer);
      co_return;
    }
    const auto& head = parser->get();
    std::string path(head.target());
    std::optional<denial> refused;
    if (head.method() == bhttp::verb::connect || path.empty() || path.front() != '/') {
      refused = denial{400, "not an origin-form request", "an intercepted request names a path, not a URL"};
    } else if (auto host = head.find(bhttp::field::host); host != head.end()) {
      // The request goes to the CONNECT's host, whose certificate was verified and whose policy
      // applies: a Host naming another would be routed by the upstream where nothing was decided.
      auto named = parse_authority(std::string(host->value()).find(':') == std::string::npos
                                       ? std::string(host->value()) + ":" + std::to_string(target.where.port)
                                       : std::string(host->value()));
      if (!named || normalize_host(named->host) != target.host || named->port != target.where.port)
        refused = denial{421, "Host " + std::string(host->value()) + " on a connection to " + target.host,
                         "the Host header names another host than the CONNECT did"};
    }
    if (!refused && (parser->chunked() || head.find(bhttp::field::transfer_encoding) != head.end()))
      refused = denial{411, "chunked request body on an intercepted connection",
                       "send a Content-Length (chunked request bodies are not intercepted)"};
    if (refused) {
      auto answer = deny(st, c, ev, std::move(*refused));
      co_await std::move(answer);
      co_return;
    }
    auto verdict = decide_request(sandbox->rule_set(), target.host, head.method_string(), path);
    const std::uint64_t body = parser->content_length().value_or(0);
    if (!verdict.allowed) {
      auto d = rule_denial(verdict);
      // A refusal keeps the connection when the client does (the next request is decided anew).
      if (head.keep_alive() && head.version() == 11 && body <= max_drained) {
        ev.decision = "deny";
        ev.status = d.status;
        ev.reason = d.reason;
        report(st, c, ev);
        auto skipping = skip_body(st, c, body);
        if (!co_await std::move(skipping)) co_return;
        auto bytes = deny_response(d.status, d.message, d.why);
        bytes.replace(bytes.find("Connection: close\r\n"), 19, "");
        c.client.expires_after(st.options.idle_timeout);
        auto [wec, wn] = co_await asio::async_write(c.client, asio::buffer(bytes), use_tuple);
        c.client.expires_never();
        if (wec || c.closing()) co_return;
        continue;
      }
      auto answer = deny(st, c, ev, std::move(d));
      co_await std::move(answer);
      co_return;
    }
    auto upstream = intercepted_request_head(head, target.host, host_header, sandbox->secrets);
    ev.injected = upstream.injected;
    c.upstream.expires_after(st.options.idle_timeout);
    auto [uec, un] = co_await asio::async_write(c.upstream, asio::buffer(upstream.head), use_tuple);
    c.upstream.expires_never();
    ev.bytes_out += un;
    bool ok = !uec && !c.closing();
    if (ok && body > 0) {
      auto sending = copy_exactly(st, c.client, c.buffer, c.upstream, body, ev.bytes_out);
      ok = co_await std::move(sending);
    }
    bool keep_alive = false;
    if (ok) {
      // A local, not a temporary: the coroutine keeps a reference to it until it is done.
      const auto replacing = response_replacements(sandbox->secrets, target.host);
      auto relaying = relay_intercepted_response(st, c, ev, head, replacing, !upstream.injected.empty(), keep_alive);
      ok = co_await std::move(relaying);
    }
    ev.decision = "allow";
    if (ev.reason.empty()) ev.reason = c.closed_because() ? *c.closed_because() : ok ? "closed" : "reset";
    report(st, c, ev);
    if (!ok || !keep_alive || c.closing()) co_return;
  }
  if (served == 0) {  // intercepted, and the client asked nothing: the tunnel is still a decision
    egress_event ev = base;
    ev.intercepted = true;
    ev.decision = "allow";
    ev.status = 200;
    ev.reason = c.closed_because().value_or("closed");
    report(st, c, ev);
  }
}

// The connection's requests, each read and checked up to its target. A denial, or nullopt when
// there is nothing (more) to answer.
asio::awaitable<std::optional<denial>> handle(state& st, connection& c, egress_event& ev) {
  std::optional<head_parser> parser;
  auto first = read_request(st, c, parser, st.options.header_timeout);
  auto first_refused = co_await std::move(first);
  if (first_refused) co_return first_refused;
  if (!parser) co_return std::nullopt;
  auto authenticated = authenticate(st, c, parser->get(), ev);
  if (!authenticated) co_return denial{407, authenticated.err().message, "proxy authentication required"};
  std::optional<sandbox_egress> sandbox = std::move(*authenticated);
  c.sandbox_id = sandbox->sandbox_id;
  if (auto full = take_tunnel_slot(st, c)) co_return full;
  for (;;) {
    const auto& head = parser->get();
    auto target = parse_request_target(head.method() == bhttp::verb::connect, head.target());
    if (!target) co_return denial{400, target.err().message, target.err().message};
    ev.host = target->host;
    ev.port = target->where.port;
    next_request next;
    auto proceeding = proceed(st, c, ev, *sandbox, *target, *parser, next);
    auto refused = co_await std::move(proceeding);
    if (refused) co_return refused;
    if (!next.keep_alive || c.closing()) co_return std::nullopt;
    // The next request on this connection: a decision of its own, against the policy as it is now.
    egress_event fresh;
    fresh.sandbox_id = ev.sandbox_id;
    fresh.org_id = ev.org_id;
    fresh.source = ev.source;
    ev = std::move(fresh);
    c.started = clock::now();
    parser.reset();
    auto reading = read_request(st, c, parser, st.options.idle_timeout);
    auto unreadable = co_await std::move(reading);
    if (unreadable) co_return unreadable;
    if (!parser) co_return std::nullopt;
    sandbox = current_sandbox(st, c);
    if (!sandbox) co_return denial{407, "sandbox not started", "proxy authentication required"};
  }
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
