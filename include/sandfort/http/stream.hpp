#pragma once
// Streaming routes: a handler that takes the connection once the request header is read, so
// bodies of any size flow through without being held in memory (file transfer), responses
// are produced as they happen (server-sent events), or the connection becomes a WebSocket.
//
// The server asks a selector, with the header alone, whether a request is streamed; if so the
// handler owns the exchange: it reads the body through `parser` (a buffer_body parser, so in
// pieces), writes its whole response itself, and says whether the connection may be reused.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/http/message.hpp"
#include "sandfort/http/router.hpp"
#include "sandfort/http/use_tuple.hpp"
#include <optional>
#include <vector>

namespace sandfort::http {

using tcp_protocol = boost::asio::ip::tcp;
using unix_protocol = boost::asio::local::stream_protocol;

template <typename Protocol>
struct exchange {
  boost::beast::basic_stream<Protocol>& stream;
  boost::beast::flat_buffer& buffer;                       // bytes read past the header
  bhttp::request_parser<bhttp::buffer_body>& parser;       // header read, body not yet
  std::string request_id;
  std::string path;
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> params;  // filled by the selector's route match
  std::string remote;  // the client's address, as for a plain request (server_options::client_address)
};

// Returns true when the connection may serve another request.
template <typename Protocol>
using stream_handler = std::function<boost::asio::awaitable<bool>(exchange<Protocol>&)>;

// Given the header and its path, the handler for a streamed request, or an empty function.
template <typename Protocol>
using stream_selector = std::function<stream_handler<Protocol>(const bhttp::request_header<>& header,
                                                               const std::string& path,
                                                               std::map<std::string, std::string>& params)>;

// A streamed route, as data like the plain ones. `when` narrows it further (for example to
// requests that accept text/event-stream); an empty `when` always matches.
template <typename Protocol>
struct stream_route {
  verb method;
  std::string pattern;
  stream_handler<Protocol> fn;
  std::function<bool(const bhttp::request_header<>&)> when = {};
};

template <typename Protocol>
stream_selector<Protocol> make_stream_selector(std::vector<stream_route<Protocol>> routes) {
  return [routes = std::move(routes)](const bhttp::request_header<>& header, const std::string& path,
                                      std::map<std::string, std::string>& params) -> stream_handler<Protocol> {
    for (const auto& r : routes) {
      if (r.method != header.method()) continue;
      std::map<std::string, std::string> p;
      if (!match_pattern(r.pattern, path, p)) continue;
      if (r.when && !r.when(header)) continue;
      params = std::move(p);
      return r.fn;
    }
    return {};
  };
}

// Writes a complete (non-streamed) response on an exchange: X-Request-Id set, keep-alive
// only when the request allows it and its body has been read entirely.
template <typename Protocol>
boost::asio::awaitable<bool> respond(exchange<Protocol>& ex, response res) {
  res.set("X-Request-Id", ex.request_id);
  res.keep_alive(ex.parser.get().keep_alive() && ex.parser.is_done());
  res.prepare_payload();
  auto [ec, n] = co_await bhttp::async_write(ex.stream, res, use_tuple);
  co_return !ec && res.keep_alive();
}

template <typename Protocol>
boost::asio::awaitable<bool> respond_error(exchange<Protocol>& ex, const error& e) {
  co_return co_await respond(ex, error_response(e, ex.request_id));
}

// Reads the rest of the body into a string, for streamed routes that also take small JSON.
template <typename Protocol>
boost::asio::awaitable<result<std::string>> read_small_body(exchange<Protocol>& ex, std::size_t limit) {
  std::string out;
  char chunk[16 * 1024];
  ex.buffer.reserve(std::min(sizeof chunk, ex.buffer.max_size()));  // within its bound: reserve would raise it
  while (!ex.parser.is_done()) {
    ex.parser.get().body().data = chunk;
    ex.parser.get().body().size = sizeof chunk;
    auto [ec, n] = co_await bhttp::async_read(ex.stream, ex.buffer, ex.parser, use_tuple);
    if (ec && ec != bhttp::error::need_buffer) co_return make_error(errc::invalid_argument, "reading the body: " + ec.message());
    out.append(chunk, sizeof chunk - ex.parser.get().body().size);
    if (out.size() > limit) co_return make_error(errc::payload_too_large, "body exceeds " + std::to_string(limit) + " bytes");
  }
  co_return out;
}

// A chunked response written piece by piece (server-sent events, downloads of unknown size).
template <typename Protocol>
class chunked_writer {
 public:
  explicit chunked_writer(exchange<Protocol>& ex) : ex_(ex) {}

  boost::asio::awaitable<bool> start(unsigned status, const std::string& content_type) {
    bhttp::response<bhttp::empty_body> head{static_cast<bhttp::status>(status), 11};
    head.set(bhttp::field::content_type, content_type);
    head.set(bhttp::field::cache_control, "no-store");
    head.set("X-Request-Id", ex_.request_id);
    head.chunked(true);
    head.keep_alive(ex_.parser.get().keep_alive() && ex_.parser.is_done());
    keep_alive_ = head.keep_alive();
    bhttp::response_serializer<bhttp::empty_body> sr{head};
    auto [ec, n] = co_await bhttp::async_write_header(ex_.stream, sr, use_tuple);
    co_return !ec;
  }

  // False once the client is gone: the caller stops producing.
  boost::asio::awaitable<bool> write(std::string_view bytes) {
    if (bytes.empty()) co_return true;
    auto [ec, n] = co_await boost::asio::async_write(
        ex_.stream, bhttp::make_chunk(boost::asio::const_buffer(bytes.data(), bytes.size())), use_tuple);
    co_return !ec;
  }

  // Returns whether the connection may be reused.
  boost::asio::awaitable<bool> finish() {
    auto [ec, n] = co_await boost::asio::async_write(ex_.stream, bhttp::make_chunk_last(), use_tuple);
    co_return !ec && keep_alive_;
  }

 private:
  exchange<Protocol>& ex_;
  bool keep_alive_ = false;
};

// One server-sent event. `data` is written as one `data:` line per line of text.
std::string sse_event(std::string_view event, std::string_view data);

// True when the client asked for server-sent events.
bool wants_event_stream(const bhttp::request_header<>& header);

}  // namespace sandfort::http
