#pragma once
// The PTY's WebSocket session: terminal bytes in binary frames both ways, JSON control in text
// frames, until the program exits (exit message, then a normal close) or the client goes
// (the program is hung up, then killed if it outlives the grace period).

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/buffered_read_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <chrono>
#include <utility>

#include "pty/terminal.hpp"
#include "sandfort/http/any_stream.hpp"

namespace sandfort::agent::pty {

// The HTTP server's connection after the upgrade. Bytes it read past the request header belong
// to the WebSocket: they sit in buffer() and are read before the socket.
class upgraded_stream : public boost::beast::buffered_read_stream<http::any_stream&, boost::beast::flat_buffer> {
 public:
  using buffered_read_stream::buffered_read_stream;
};

// The WebSocket's closing handshake ends on the socket underneath (found by ADL).
inline void teardown(boost::beast::role_type role, upgraded_stream& stream, boost::beast::error_code& ec) {
  http::teardown(role, stream.next_layer(), ec);
}

template <typename Handler>
void async_teardown(boost::beast::role_type role, upgraded_stream& stream, Handler&& handler) {
  http::async_teardown(role, stream.next_layer(), std::forward<Handler>(handler));
}

using websocket = boost::beast::websocket::stream<upgraded_stream>;

struct session_options {
  std::chrono::milliseconds hangup_grace{2'000};   // SIGHUP → SIGKILL
  std::chrono::milliseconds drain_idle{100};       // after the exit, output quiet this long is the end
  std::chrono::milliseconds drain_limit{1'000};    // background jobs may keep writing forever
  std::size_t read_chunk = 64 * 1024;
};

// Runs until both the program and the connection are gone; the program is reaped on return.
// ws has been accepted.
boost::asio::awaitable<void> run_session(websocket& ws, terminal& term, session_options options);

}  // namespace sandfort::agent::pty
