// A port inside the sandbox for sandfortd (forward.hpp).
#include "ports/forward.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <charconv>
#include <set>

#include "sandfort/home/port.hpp"
#include "sandfort/http/proxy.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent::ports {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::set<unsigned short>& private_ports() {
  static std::set<unsigned short> ports;
  return ports;
}

std::optional<unsigned short> parse_port(const std::string& text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) return std::nullopt;
  return static_cast<unsigned short>(value);
}

// An application may listen on either loopback; one on 0.0.0.0 or :: answers on both.
asio::awaitable<std::optional<tcp::socket>> connect_loopback(unsigned short port) {
  auto executor = co_await asio::this_coro::executor;
  for (auto address : {asio::ip::address(asio::ip::address_v4::loopback()),
                       asio::ip::address(asio::ip::address_v6::loopback())}) {
    tcp::socket socket(executor);
    auto [ec] = co_await socket.async_connect(tcp::endpoint(address, port), use_tuple);
    if (!ec) co_return std::move(socket);
  }
  co_return std::nullopt;
}

asio::awaitable<bool> open_port(http::exchange& ex) {
  auto& header = ex.parser.get();
  if (!boost::beast::iequals(header[http::bhttp::field::upgrade], home::port_upgrade)) {
    error refused = make_error(errc::invalid_argument, "GET /tcp/{port} needs Upgrade: sandfort-tcp");
    co_return co_await http::respond_error(ex, refused);
  }
  auto port = parse_port(ex.params["port"]);
  if (!port) {
    error refused = make_error(errc::invalid_argument, "not a TCP port: " + ex.params["port"]);
    co_return co_await http::respond_error(ex, refused);
  }
  if (private_ports().contains(*port)) {
    error refused = make_error(errc::permission_denied, "port " + std::to_string(*port) + " is the agent's own");
    co_return co_await http::respond_error(ex, refused);
  }
  auto app_socket = co_await connect_loopback(*port);
  if (!app_socket) {
    error refused = make_error(errc::unavailable, "nothing is listening on port " + std::to_string(*port));
    co_return co_await http::respond_error(ex, refused);
  }
  http::any_stream app(std::move(*app_socket));
  boost::system::error_code ignored;
  app.socket().set_option(tcp::no_delay(true), ignored);
  const std::string switching = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " +
                                std::string(home::port_upgrade) + "\r\n\r\n";
  auto [wec, written] = co_await asio::async_write(ex.stream, asio::buffer(switching), use_tuple);
  if (wec) co_return false;
  if (ex.buffer.size() > 0) {  // bytes that came with the request are the application's
    auto [aec, passed] = co_await asio::async_write(app, ex.buffer.data(), use_tuple);
    if (aec) co_return false;
    ex.buffer.consume(ex.buffer.size());
  }
  co_await http::splice_streams(ex.stream, app);
  co_return false;  // the link was the application's
}

}  // namespace

std::vector<http::stream_route> stream_routes() {
  // Member by member: GCC 12 crashes on aggregate initialization of stream_route.
  http::stream_route tcp_port;
  tcp_port.method = http::verb::get;
  tcp_port.pattern = "/tcp/{port}";
  tcp_port.fn = &open_port;
  return {std::move(tcp_port)};
}

void keep_private(unsigned short port) { private_ports().insert(port); }

}  // namespace sandfort::agent::ports
