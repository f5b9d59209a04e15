#include "sandfort/http/proxy.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

namespace sandfort::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using detail::use_tuple;

namespace {

constexpr std::size_t piece = 64 * 1024;

// Moves one message body from `in` (header already read into parser) to `out` (header about to
// be written by sr), a piece at a time. Returns false when either side failed.
template <typename InStream, typename OutStream, typename Parser, typename Serializer>
asio::awaitable<bool> relay_body(InStream& in, beast::flat_buffer& in_buffer, Parser& parser, OutStream& out,
                                 Serializer& sr) {
  std::vector<char> chunk(piece);
  // Beast reads no more than the buffer has room for: without room, a body arrives 512 bytes
  // at a time.
  in_buffer.reserve(piece);
  auto [hec, hn] = co_await bhttp::async_write_header(out, sr, use_tuple);
  if (hec) co_return false;
  do {
    auto& body = parser.get().body();
    if (!parser.is_done()) {
      body.data = chunk.data();
      body.size = chunk.size();
      // read_some: a slow producer (events, logs) is passed on as soon as bytes arrive.
      auto [ec, n] = co_await bhttp::async_read_some(in, in_buffer, parser, use_tuple);
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) co_return false;
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
    auto [wec, wn] = co_await bhttp::async_write(out, sr, use_tuple);
    if (wec == bhttp::error::need_buffer) wec = {};
    if (wec) co_return false;
  } while (!parser.is_done() || !sr.is_done());
  co_return true;
}

// Copies bytes one way until EOF or an error, then shuts the other side's sending half.
template <typename From, typename To>
asio::awaitable<void> pump(From& from, To& to) {
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

template <typename Stream>
asio::awaitable<bool> flush(Stream& to, beast::flat_buffer& leftover) {
  if (leftover.size() == 0) co_return true;
  auto [ec, n] = co_await asio::async_write(to, leftover.data(), use_tuple);
  leftover.consume(leftover.size());
  co_return !ec;
}

}  // namespace

asio::awaitable<bool> proxy_to_unix(exchange<tcp_protocol>& ex, proxy_target target) {
  beast::basic_stream<unix_protocol> upstream(co_await asio::this_coro::executor);
  upstream.expires_after(target.connect_timeout);
  auto [cec] = co_await upstream.async_connect(unix_protocol::endpoint(target.socket_path), use_tuple);
  if (cec)
    co_return co_await respond_error(
        ex, make_error(errc::unavailable, "the sandbox agent is not reachable: " + cec.message()));
  upstream.expires_never();

  auto& req = ex.parser.get();
  bool upgrade = beast::websocket::is_upgrade(req);
  // We relay the body ourselves: the client may send it now (the agent's interim answer would
  // be mistaken for its final one).
  if (auto expect = req.find(bhttp::field::expect);
      expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
    req.erase(bhttp::field::expect);
    bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, 11};
    auto [ec, n] = co_await bhttp::async_write(ex.stream, go_on, use_tuple);
    if (ec) co_return false;
  }
  bool client_keep_alive = req.keep_alive();
  req.target(target.target);
  req.erase(bhttp::field::authorization);  // the agent never sees the caller's credentials
  req.erase(bhttp::field::cookie);
  req.set(bhttp::field::host, "agent");
  if (!target.websocket_protocol.empty()) req.erase(bhttp::field::sec_websocket_protocol);
  req.set("X-Request-Id", ex.request_id);
  bhttp::request_serializer<bhttp::buffer_body> req_sr{req};
  if (!co_await relay_body(ex.stream, ex.buffer, ex.parser, upstream, req_sr)) co_return false;

  beast::flat_buffer up_buffer;
  bhttp::response_parser<bhttp::buffer_body> res_parser;
  res_parser.body_limit(boost::none);
  auto [rec, rn] = co_await bhttp::async_read_header(upstream, up_buffer, res_parser, use_tuple);
  if (rec)
    co_return co_await respond_error(
        ex, make_error(errc::unavailable, "the sandbox agent closed the connection: " + rec.message()));
  auto& res = res_parser.get();
  res.set("X-Request-Id", ex.request_id);

  if (upgrade && res.result() == bhttp::status::switching_protocols) {
    if (!target.websocket_protocol.empty()) res.set(bhttp::field::sec_websocket_protocol, target.websocket_protocol);
    bhttp::response_serializer<bhttp::buffer_body> sr{res};
    auto [wec, wn] = co_await bhttp::async_write_header(ex.stream, sr, use_tuple);
    if (wec) co_return false;
    // From here on it is the WebSocket's bytes, in both directions, until one side closes.
    if (!co_await flush(upstream, ex.buffer) || !co_await flush(ex.stream, up_buffer)) co_return false;
    using namespace asio::experimental::awaitable_operators;
    co_await (pump(ex.stream, upstream) && pump(upstream, ex.stream));
    co_return false;
  }

  // A body without a length ends with the connection: the client's must end too.
  bool framed = res.chunked() || res.has_content_length() || res_parser.is_done();
  res.keep_alive(client_keep_alive && framed);
  bhttp::response_serializer<bhttp::buffer_body> res_sr{res};
  if (!co_await relay_body(upstream, up_buffer, res_parser, ex.stream, res_sr)) co_return false;
  co_return res.keep_alive();
}

}  // namespace sandfort::http
