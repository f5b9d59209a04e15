#pragma once
// Streaming routes: a handler that takes the connection once the request header is read, so
// bodies of any size flow through without being held in memory (file transfer), responses
// are produced as they happen (server-sent events), or the connection becomes a WebSocket.
//
// The server asks a selector, with the header alone, whether a request is streamed; if so the
// handler owns the exchange: it reads the body through `parser` (a buffer_body parser, so in
// pieces), writes its whole response itself, and says whether the connection may be reused.

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/http/any_stream.hpp"
#include "sandfort/http/message.hpp"
#include "sandfort/http/router.hpp"

namespace sandfort::http {

struct exchange {
  any_stream& stream;
  boost::beast::flat_buffer& buffer;                       // bytes read past the header
  bhttp::request_parser<bhttp::buffer_body>& parser;       // header read, body not yet
  std::string request_id;
  std::string path;
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> params;  // filled by the selector's route match
  std::string remote;  // the client's address, as for a plain request (server_options::client_address)
};

// Returns true when the connection may serve another request.
using stream_handler = std::function<boost::asio::awaitable<bool>(exchange&)>;

// Given the header and its path, the handler for a streamed request, or an empty function.
using stream_selector = std::function<stream_handler(const bhttp::request_header<>& header, const std::string& path,
                                                     std::map<std::string, std::string>& params)>;

// A streamed route, as data like the plain ones. `when` narrows it further (for example to
// requests that accept text/event-stream); an empty `when` always matches.
struct stream_route {
  verb method;
  std::string pattern;
  stream_handler fn;
  std::function<bool(const bhttp::request_header<>&)> when = {};
};

stream_selector make_stream_selector(std::vector<stream_route> routes);

// Writes a complete (non-streamed) response on an exchange: X-Request-Id set, keep-alive
// only when the request allows it and its body has been read entirely.
boost::asio::awaitable<bool> respond(exchange& ex, response res);
boost::asio::awaitable<bool> respond_error(exchange& ex, const error& e);

// Reads the rest of the body into a string, for streamed routes that also take small JSON.
boost::asio::awaitable<result<std::string>> read_small_body(exchange& ex, std::size_t limit);

// A chunked response written piece by piece (server-sent events, downloads of unknown size).
class chunked_writer {
 public:
  explicit chunked_writer(exchange& ex) : ex_(ex) {}

  boost::asio::awaitable<bool> start(unsigned status, const std::string& content_type);
  // False once the client is gone: the caller stops producing.
  boost::asio::awaitable<bool> write(std::string_view bytes);
  // Returns whether the connection may be reused.
  boost::asio::awaitable<bool> finish();

 private:
  exchange& ex_;
  bool keep_alive_ = false;
};

// One server-sent event. `data` is written as one `data:` line per line of text.
std::string sse_event(std::string_view event, std::string_view data);

// True when the client asked for server-sent events.
bool wants_event_stream(const bhttp::request_header<>& header);

}  // namespace sandfort::http
