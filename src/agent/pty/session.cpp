#include "pty/session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "pty/wire.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent::pty {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using error_code = boost::system::error_code;
using asio::posix::stream_descriptor;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What goes to the client, in order, through the one coroutine that writes to the socket.
struct outgoing {
  enum class kind { binary, text, close };
  kind type = kind::binary;
  std::string data;
};

// Few pieces in flight: when the client reads slowly we stop reading the terminal, so the
// program blocks on its writes instead of its output piling up here.
constexpr std::size_t outbox_depth = 2;
using outbox = asio::experimental::channel<void(error_code, outgoing)>;

struct session {
  session(websocket& w, terminal& t, session_options o)
      : ws(w), term(t), options(o), out(w.get_executor(), outbox_depth),
        client_gone(w.get_executor(), asio::steady_timer::time_point::max()) {}

  websocket& ws;
  terminal& term;
  session_options options;
  outbox out;
  asio::steady_timer client_gone;  // expires at once when the client leaves
  bool client_left = false;
  bool program_exited = false;  // and reaped
  int exit_code = 0;
};

// False once nobody will write to the client any more. (msg is a reference: no temporary with
// a destructor may sit in a co_await expression with GCC 12.)
asio::awaitable<bool> post(session& s, outgoing& msg) {
  error_code none;
  auto [ec] = co_await s.out.async_send(none, std::move(msg), use_tuple);
  co_return !ec;
}

asio::awaitable<void> control(session& s, const beast::flat_buffer& frame) {
  std::string text = beast::buffers_to_string(frame.data());
  auto request = parse_control(text);
  result<void> done = request ? s.term.resize(request->size) : result<void>(request.err());
  if (done) co_return;
  // Answered, never fatal: the terminal goes on.
  outgoing reply{outgoing::kind::text, error_message(done.err().message)};
  co_await post(s, reply);
}

// Client → terminal, until the connection ends (a close frame, a drop, or the agent stopping).
asio::awaitable<void> read_client(session& s) {
  beast::flat_buffer frame;
  for (;;) {
    auto [ec, n] = co_await s.ws.async_read(frame, use_tuple);
    if (ec) break;
    if (!s.ws.got_binary()) {
      co_await control(s, frame);
    } else if (!s.program_exited) {
      // Keystrokes block here while the program does not read them: back-pressure to the client.
      auto keys = frame.data();
      auto [wec, wn] = co_await asio::async_write(s.term.master(), keys, use_tuple);
      (void)wec;  // a terminal that is gone shows as the program's exit
    }
    frame.consume(frame.size());
  }
  s.client_left = true;
  s.out.close();
  s.client_gone.expires_at(asio::steady_timer::time_point::min());
}

// The one writer of the WebSocket.
asio::awaitable<void> write_client(session& s) {
  for (;;) {
    auto [ec, msg] = co_await s.out.async_receive(use_tuple);
    if (ec) break;
    if (msg.type == outgoing::kind::close) {
      beast::websocket::close_reason normal(beast::websocket::close_code::normal);
      co_await s.ws.async_close(normal, use_tuple);  // its outcome shows in the reader
      break;
    }
    s.ws.text(msg.type == outgoing::kind::text);
    auto bytes = asio::buffer(msg.data);
    auto [wec, wn] = co_await s.ws.async_write(bytes, use_tuple);
    if (wec) {
      // The connection is broken: make sure the reader sees it too.
      error_code ignored;
      s.ws.next_layer().next_layer().socket().shutdown(asio::socket_base::shutdown_both, ignored);
      break;
    }
  }
  s.out.close();
}

// Terminal → client. After the exit, what the program left in the terminal still goes out,
// but background jobs that keep the terminal open are not waited for.
asio::awaitable<void> pump_output(session& s) {
  using namespace asio::experimental::awaitable_operators;
  std::vector<char> chunk(s.options.read_chunk);
  asio::steady_timer quiet(s.ws.get_executor());
  std::optional<steady::time_point> drain_end;
  for (;;) {
    error_code ec;
    std::size_t n = 0;
    if (!s.program_exited) {
      std::tie(ec, n) = co_await s.term.master().async_read_some(asio::buffer(chunk), use_tuple);
      if (ec == asio::error::operation_aborted && s.program_exited) continue;  // the exit interrupted us
    } else {
      auto now = steady::now();
      if (!drain_end) drain_end = now + s.options.drain_limit;
      if (now >= *drain_end) break;
      quiet.expires_after(std::min<steady::duration>(s.options.drain_idle, *drain_end - now));
      auto first = co_await (s.term.master().async_read_some(asio::buffer(chunk), use_tuple) ||
                             quiet.async_wait(use_tuple));
      if (first.index() == 1) break;
      std::tie(ec, n) = std::get<0>(first);
    }
    if (ec) break;  // EIO: no process holds the terminal any more
    outgoing piece{outgoing::kind::binary, std::string(chunk.data(), n)};
    if (!co_await post(s, piece)) break;
  }
}

// The client left: hang up, as when a terminal window closes. Whatever of the session is
// still there after the grace period (the program, or jobs that ignore SIGHUP) is killed. The
// program stays unreaped until then, so the session id cannot be reused meanwhile.
asio::awaitable<void> end_program(session& s) {
  using namespace asio::experimental::awaitable_operators;
  constexpr milliseconds poll{50};  // the jobs are not our children: nothing tells us they ended
  auto& exited = s.term.exited();
  auto deadline = steady::now() + s.options.hangup_grace;
  asio::steady_timer tick(s.ws.get_executor());
  bool program_gone = false;
  s.term.hang_up();
  for (;;) {
    if (program_gone && !s.term.session_has_others()) co_return;
    auto now = steady::now();
    if (now >= deadline) break;
    tick.expires_after(std::min<steady::duration>(poll, deadline - now));
    if (program_gone) {
      co_await tick.async_wait(use_tuple);
      continue;
    }
    auto first = co_await (exited.async_wait(stream_descriptor::wait_read, use_tuple) || tick.async_wait(use_tuple));
    if (first.index() == 0) {
      if (std::get<0>(std::get<0>(first))) break;
      program_gone = true;
    }
  }
  s.term.kill();
  if (!program_gone) co_await exited.async_wait(stream_descriptor::wait_read, use_tuple);
}

// Waits for the program's exit, or for the client to leave and then ends the program.
asio::awaitable<void> watch_program(session& s) {
  using namespace asio::experimental::awaitable_operators;
  auto first = co_await (s.term.exited().async_wait(stream_descriptor::wait_read, use_tuple) ||
                         s.client_gone.async_wait(use_tuple));
  if (first.index() == 1 || std::get<0>(std::get<0>(first))) co_await end_program(s);
  s.exit_code = s.term.reap();
  s.program_exited = true;
  error_code ignored;
  s.term.master().cancel(ignored);  // the output pump switches to draining
}

asio::awaitable<void> run_program(session& s) {
  using namespace asio::experimental::awaitable_operators;
  co_await (pump_output(s) && watch_program(s));
  if (s.client_left) co_return;
  outgoing exit{outgoing::kind::text, exit_message(s.exit_code)};
  if (!co_await post(s, exit)) co_return;
  outgoing bye{outgoing::kind::close, {}};
  co_await post(s, bye);
}

}  // namespace

asio::awaitable<void> run_session(websocket& ws, terminal& term, session_options options) {
  using namespace asio::experimental::awaitable_operators;
  session s(ws, term, options);
  co_await (read_client(s) && write_client(s) && run_program(s));
}

}  // namespace sandfort::agent::pty
