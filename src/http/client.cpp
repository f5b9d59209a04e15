#include "sandfort/http/client.hpp"
#include "sandfort/http/use_tuple.hpp"

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "sandfort/http/any_stream.hpp"

namespace sandfort::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using unix_socket = asio::local::stream_protocol;

request make_request(verb method, std::string target, const nlohmann::json* body) {
  request req{method, target, 11};
  req.set(bhttp::field::host, "localhost");
  if (body) {
    req.set(bhttp::field::content_type, "application/json");
    req.body() = body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  req.prepare_payload();
  return req;
}

asio::awaitable<result<response>> unix_request(std::string socket_path, request req, client_options options) {
  any_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(options.connect_timeout);
  auto [cec] = co_await stream.async_connect(unix_socket::endpoint(socket_path), use_tuple);
  if (cec) co_return make_error(errc::unavailable, "cannot connect to " + socket_path + ": " + cec.message());

  if (req.find(bhttp::field::host) == req.end()) req.set(bhttp::field::host, "localhost");
  req.prepare_payload();
  stream.expires_after(options.timeout);
  auto [wec, wn] = co_await bhttp::async_write(stream, req, use_tuple);
  if (wec) co_return make_error(errc::unavailable, "write to " + socket_path + " failed: " + wec.message());

  beast::flat_buffer buffer = bounded_read_buffer();
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(options.body_limit);
  auto [rec, rn] = co_await bhttp::async_read(stream, buffer, parser, use_tuple);
  if (rec == beast::error::timeout)
    co_return make_error(errc::unavailable, "no answer from " + socket_path + " within " +
                                                std::to_string(options.timeout.count()) + " ms");
  if (rec) co_return make_error(errc::unavailable, "read from " + socket_path + " failed: " + rec.message());
  beast::error_code ignored;
  stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
  co_return parser.release();
}

}  // namespace sandfort::http
