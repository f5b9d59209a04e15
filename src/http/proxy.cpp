#include "sandfort/http/proxy.hpp"
#include "sandfort/http/use_tuple.hpp"

#include <algorithm>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <sys/socket.h>

namespace sandfort::http {

namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {

constexpr std::size_t piece = 64 * 1024;

// Which side of a body relay gave up: a failing upstream may still have an answer to read.
enum class relayed { whole, reader_failed, writer_failed };

// Moves one message body from `in` (header already read into parser) to `out` (header about to
// be written by sr), a piece at a time. arm() runs before every read and write: it sets the
// upstream's deadline for the next step.
template <typename Parser, typename Serializer, typename Arm>
asio::awaitable<relayed> relay_body(any_stream& in, beast::flat_buffer& in_buffer, Parser& parser, any_stream& out,
                                    Serializer& sr, Arm arm) {
  std::vector<char> chunk(piece);
  // Beast reads no more than the buffer has room for: without room, a body arrives 512 bytes
  // at a time. Within the buffer's bound (reserve would raise it).
  in_buffer.reserve(std::min(piece, in_buffer.max_size()));
  arm();
  auto [hec, hn] = co_await bhttp::async_write_header(out, sr, use_tuple);
  if (hec) co_return relayed::writer_failed;
  do {
    auto& body = parser.get().body();
    if (!parser.is_done()) {
      body.data = chunk.data();
      body.size = chunk.size();
      // read_some: a slow producer (events, logs) is passed on as soon as bytes arrive.
      arm();
      auto [ec, n] = co_await bhttp::async_read_some(in, in_buffer, parser, use_tuple);
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) co_return relayed::reader_failed;
      body.size = chunk.size() - body.size;
      // Nothing for the body yet (only framing was read): an empty piece would be serialized
      // as the last chunk, ending the message early.
      if (body.size == 0 && !parser.is_done()) continue;
      body.data = chunk.data();
      body.more = !parser.is_done();
    } else {
      body.data = nullptr;
      body.size = 0;
      body.more = false;  // the default (true) would have the serializer wait for more forever
    }
    arm();
    auto [wec, wn] = co_await bhttp::async_write(out, sr, use_tuple);
    if (wec == bhttp::error::need_buffer) wec = {};
    if (wec) co_return relayed::writer_failed;
  } while (!parser.is_done() || !sr.is_done());
  co_return relayed::whole;
}

// Copies bytes one way until EOF or an error, then shuts the other side's sending half.
asio::awaitable<void> pump(any_stream& from, any_stream& to) {
  std::vector<char> chunk(piece);
  for (;;) {
    auto [ec, n] = co_await from.async_read_some(asio::buffer(chunk), use_tuple);
    if (ec) break;
    auto [wec, wn] = co_await asio::async_write(to, asio::buffer(chunk.data(), n), use_tuple);
    if (wec) break;
  }
  beast::error_code ignored;
  to.socket().shutdown(asio::socket_base::shutdown_send, ignored);
}

asio::awaitable<bool> flush(any_stream& to, beast::flat_buffer& leftover) {
  if (leftover.size() == 0) co_return true;
  auto [ec, n] = co_await asio::async_write(to, leftover.data(), use_tuple);
  leftover.consume(leftover.size());
  co_return !ec;
}

// We relay the body ourselves: the client may send it now (the upstream's interim answer would
// be mistaken for its final one).
asio::awaitable<bool> continue_if_expected(exchange& ex) {
  auto& req = ex.parser.get();
  auto expect = req.find(bhttp::field::expect);
  if (expect == req.end() || !beast::iequals(expect->value(), "100-continue")) co_return true;
  req.erase(bhttp::field::expect);
  bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, 11};
  auto [ec, n] = co_await bhttp::async_write(ex.stream, go_on, use_tuple);
  co_return !ec;
}

}  // namespace

// A client reading an event stream sends nothing, so its socket turning readable means it left.
// Bytes of a pipelined request (or a TLS record) are no departure: then this waits until
// cancelled, and the next write tells.
asio::awaitable<void> until_client_leaves(exchange& ex) {
  auto [ec] = co_await ex.stream.async_wait_readable(use_tuple);
  if (ec) co_return;
  char c = 0;
  if (::recv(ex.stream.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
    asio::steady_timer forever(ex.stream.get_executor(), asio::steady_timer::time_point::max());
    auto [wec] = co_await forever.async_wait(use_tuple);
  }
}

namespace {

relay_result ended(bool keep_alive) {
  relay_result r;
  r.keep_alive = keep_alive;
  return r;
}

relay_result unanswered(beast::error_code ec) {
  relay_result r;
  r.unanswered = true;
  r.upstream_error = ec;
  return r;
}

// From the 101 on it is the WebSocket's bytes, in both directions, until one side closes.
asio::awaitable<void> splice(exchange& ex, any_stream& upstream,
                             bhttp::response_parser<bhttp::buffer_body>& res_parser, beast::flat_buffer& up_buffer) {
  bhttp::response_serializer<bhttp::buffer_body> sr{res_parser.get()};
  auto [wec, wn] = co_await bhttp::async_write_header(ex.stream, sr, use_tuple);
  if (wec) co_return;
  if (!co_await flush(upstream, ex.buffer)) co_return;
  if (!co_await flush(ex.stream, up_buffer)) co_return;
  using namespace asio::experimental::awaitable_operators;
  co_await (pump(ex.stream, upstream) && pump(upstream, ex.stream));
}

}  // namespace

asio::awaitable<void> splice_streams(any_stream& a, any_stream& b) {
  using namespace asio::experimental::awaitable_operators;
  co_await (pump(a, b) && pump(b, a));
}

asio::awaitable<relay_result> relay(exchange& ex, any_stream& upstream, relay_options options) {
  auto& req = ex.parser.get();
  bool upgrade = beast::websocket::is_upgrade(req);
  if (!co_await continue_if_expected(ex)) co_return ended(false);
  bool client_keep_alive = req.keep_alive();
  if (options.stamp_request_id) req.set("X-Request-Id", ex.request_id);
  auto idle = [&] {
    if (options.idle_timeout.count() > 0) upstream.expires_after(options.idle_timeout);
  };
  bhttp::request_serializer<bhttp::buffer_body> req_sr{req};
  relayed sent = co_await relay_body(ex.stream, ex.buffer, ex.parser, upstream, req_sr, idle);
  if (sent == relayed::reader_failed) co_return ended(false);
  // An upstream that stopped reading the body may still have answered it (413, 401): its
  // answer is worth more to the client than a reset.

  beast::flat_buffer up_buffer = bounded_read_buffer();
  bhttp::response_parser<bhttp::buffer_body> res_parser;
  res_parser.body_limit(boost::none);
  res_parser.header_limit(16 * 1024);
  if (options.answer_timeout.count() > 0) upstream.expires_after(options.answer_timeout);
  auto [rec, rn] = co_await bhttp::async_read_header(upstream, up_buffer, res_parser, use_tuple);
  upstream.expires_never();
  if (rec) co_return unanswered(rec);
  auto& res = res_parser.get();
  const bool upstream_keeps = res.keep_alive();  // before it becomes what the client is told
  if (options.stamp_request_id) res.set("X-Request-Id", ex.request_id);
  if (options.no_sniff) res.set("X-Content-Type-Options", "nosniff");
  if (options.amend_answer) options.amend_answer(res);

  if (upgrade && res.result() == bhttp::status::switching_protocols) {
    if (!options.websocket_protocol.empty()) res.set(bhttp::field::sec_websocket_protocol, options.websocket_protocol);
    co_await splice(ex, upstream, res_parser, up_buffer);
    co_return ended(false);
  }

  // A body without a length ends with the connection: the client's must end too. So must a
  // connection whose request body was not read to its end.
  bool framed = res.chunked() || res.has_content_length() || res_parser.is_done();
  res.keep_alive(client_keep_alive && framed && sent == relayed::whole);
  // An event stream lives as long as its reader; anything else must keep moving.
  auto type = res.find(bhttp::field::content_type);
  bool events = type != res.end() && beast::iequals(type->value().substr(0, 17), "text/event-stream");
  auto arm = [&] {
    if (events)
      upstream.expires_never();
    else
      idle();
  };
  bhttp::response_serializer<bhttp::buffer_body> res_sr{res};
  if (!events) {
    relayed answered = co_await relay_body(upstream, up_buffer, res_parser, ex.stream, res_sr, arm);
    relay_result r = ended(answered == relayed::whole && res.keep_alive());
    r.upstream_reusable = answered == relayed::whole && sent == relayed::whole && framed && upstream_keeps &&
                          up_buffer.size() == 0;
    co_return r;
  }
  // A quiet stream (a directory watch, a command's log) would otherwise learn that its client
  // left only at its next event: the upstream is dropped at once instead, ending its producer.
  using namespace asio::experimental::awaitable_operators;
  auto which = co_await (relay_body(upstream, up_buffer, res_parser, ex.stream, res_sr, arm) || until_client_leaves(ex));
  if (which.index() == 1) co_return ended(false);
  co_return ended(std::get<0>(which) == relayed::whole && res.keep_alive());
}

asio::awaitable<relay_result> forward(exchange& ex, any_stream& upstream, forward_options target) {
  auto& req = ex.parser.get();
  req.target(target.target);
  req.erase(bhttp::field::authorization);  // the agent never sees the caller's credentials
  req.erase(bhttp::field::cookie);
  req.set(bhttp::field::host, "agent");
  if (!target.websocket_protocol.empty()) req.erase(bhttp::field::sec_websocket_protocol);
  relay_options options;
  options.websocket_protocol = std::move(target.websocket_protocol);
  options.answer_timeout = target.answer_timeout;
  options.idle_timeout = target.idle_timeout;
  relay_result relayed_answer = co_await relay(ex, upstream, std::move(options));
  if (!relayed_answer.unanswered) co_return relayed_answer;
  error closed = make_error(errc::unavailable,
                            "the sandbox agent closed the connection: " + relayed_answer.upstream_error.message());
  co_return ended(co_await respond_error(ex, closed));
}

}  // namespace sandfort::http
