#include "pty/routes.hpp"

#include <boost/asio/this_coro.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "pty/session.hpp"
#include "pty/terminal.hpp"
#include "pty/wire.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent::pty {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

constexpr std::size_t max_input_message = 1u << 20;

// Browsers fail a connection whose answer picks none of the subprotocols they offered.
std::string first_subprotocol(const http::bhttp::request_header<>& header) {
  std::string_view offered = header[http::bhttp::field::sec_websocket_protocol];
  offered = offered.substr(0, offered.find(','));
  while (!offered.empty() && (offered.front() == ' ' || offered.front() == '\t')) offered.remove_prefix(1);
  while (!offered.empty() && (offered.back() == ' ' || offered.back() == '\t')) offered.remove_suffix(1);
  return std::string(offered);
}

void configure(websocket& ws, const std::string& request_id, const std::string& subprotocol) {
  using beast::websocket::stream_base;
  // Pings keep a quiet session alive through proxies and find clients that vanished.
  ws.set_option(stream_base::timeout::suggested(beast::role_type::server));
  ws.set_option(stream_base::decorator([request_id, subprotocol](beast::websocket::response_type& res) {
    res.set(http::bhttp::field::server, "sandfort-agent");
    res.set("X-Request-Id", request_id);
    if (!subprotocol.empty()) res.set(http::bhttp::field::sec_websocket_protocol, subprotocol);
  }));
  ws.read_message_max(max_input_message);
  ws.auto_fragment(false);
}

// Everything that can be refused is checked, and the program started, before the upgrade, so
// that refusals are plain HTTP errors (400 for a missing cwd).
asio::awaitable<bool> open_terminal(http::exchange& ex) {
  if (!beast::websocket::is_upgrade(ex.parser.get())) {
    error refused = make_error(errc::invalid_argument, "GET /pty is a WebSocket: send an Upgrade request");
    co_return co_await http::respond_error(ex, refused);
  }
  auto spec = parse_query(ex.query);
  if (!spec) {
    const error& refused = spec.err();
    co_return co_await http::respond_error(ex, refused);
  }
  auto executor = co_await asio::this_coro::executor;
  auto term = terminal::start(executor, *spec);
  if (!term) {
    const error& refused = term.err();
    co_return co_await http::respond_error(ex, refused);
  }

  http::bhttp::request<http::bhttp::empty_body> upgrade{ex.parser.get().base()};
  websocket ws(ex.stream);
  auto& early = ws.next_layer().buffer();  // frames that came with the request header
  early.commit(asio::buffer_copy(early.prepare(ex.buffer.size()), ex.buffer.data()));
  ex.buffer.consume(ex.buffer.size());
  configure(ws, ex.request_id, first_subprotocol(ex.parser.get()));
  auto [ec] = co_await ws.async_accept(upgrade, use_tuple);
  if (ec) co_return false;  // Beast has answered the bad handshake; ~terminal ends the program

  session_options options;
  co_await run_session(ws, *term, options);
  co_return false;  // the connection was the WebSocket's
}

}  // namespace

std::vector<http::stream_route> stream_routes() {
  // Member by member: GCC 12 crashes on aggregate initialization of stream_route here.
  http::stream_route pty;
  pty.method = http::verb::get;
  pty.pattern = "/pty";
  pty.fn = &open_terminal;
  return {std::move(pty)};
}

}  // namespace sandfort::agent::pty
