// `sandfort shell`: an interactive terminal over the PTY WebSocket. One thread, one io_context:
// the socket, stdin and the signals are all asynchronous, so a read never blocks a write and
// SIGWINCH becomes a resize message. The terminal is put back by a guard on every way out.
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <iostream>
#include <nlohmann/json.hpp>

#include "api_client.hpp"
#include "commands.hpp"
#include "failure.hpp"
#include "transport.hpp"

namespace sandfort::cli {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using nlohmann::json;

namespace {

class raw_terminal {
 public:
  raw_terminal() {
    if (!::isatty(STDIN_FILENO) || ::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~raw_terminal() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  raw_terminal(const raw_terminal&) = delete;
  raw_terminal& operator=(const raw_terminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

std::pair<unsigned, unsigned> terminal_size() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) return {ws.ws_col, ws.ws_row};
  return {80, 24};
}

std::string resize_message() {
  auto [cols, rows] = terminal_size();
  return json{{"type", "resize"}, {"cols", cols}, {"rows", rows}}.dump();
}

template <class Ws>
class session {
 public:
  session(net::io_context& ioc, Ws& ws)
      : ws_(ws), input_(ioc, ::dup(STDIN_FILENO)), signals_(ioc, SIGWINCH, SIGTERM, SIGHUP), eof_timer_(ioc) {
    signals_.add(SIGINT);
  }

  void start() {
    read_socket();
    read_input();
    wait_signal();
  }

  std::optional<int> exit_code() const { return exit_code_; }
  const std::string& error() const { return error_; }

 private:
  void read_socket() {
    ws_.async_read(in_, [this](beast::error_code ec, std::size_t) {
      if (ec) return finish(ec == websocket::error::closed ? std::string() : ec.message());
      std::string data = beast::buffers_to_string(in_.data());
      in_.consume(in_.size());
      if (ws_.got_binary()) {
        ::ssize_t ignored = ::write(STDOUT_FILENO, data.data(), data.size());
        (void)ignored;
      } else {
        auto j = json::parse(data, nullptr, false);
        if (j.is_object() && j.value("type", "") == "exit" && j.contains("exit_code") && j["exit_code"].is_number_integer())
          exit_code_ = j["exit_code"].get<int>();
      }
      read_socket();
    });
  }

  void read_input() {
    input_.async_read_some(net::buffer(stdin_buf_), [this](beast::error_code ec, std::size_t n) {
      if (done_) return;
      if (ec) {
        // End of input (a pipe): stop reading and hand the program end-of-file characters until
        // it is gone (one alone can be discarded while the shell is still setting up its line).
        return send_eof();
      }
      send(false, std::string(stdin_buf_.data(), n));
      read_input();
    });
  }

  void send_eof() {
    if (done_) return;
    send(false, "\x04");
    eof_timer_.expires_after(std::chrono::milliseconds(500));
    eof_timer_.async_wait([this](beast::error_code ec) {
      if (!ec) send_eof();
    });
  }

  void wait_signal() {
    signals_.async_wait([this](beast::error_code ec, int signo) {
      if (ec || done_) return;
      if (signo == SIGWINCH) {
        send(true, resize_message());
        return wait_signal();
      }
      error_ = "interrupted by signal " + std::to_string(signo);
      closing_ = true;
      ws_.async_close(websocket::close_code::normal, [](beast::error_code) {});
    });
  }

  void send(bool text, std::string bytes) {
    if (closing_ || done_) return;
    queue_.emplace_back(text, std::move(bytes));
    if (queue_.size() == 1) write_next();
  }

  void write_next() {
    ws_.text(queue_.front().first);
    ws_.async_write(net::buffer(queue_.front().second), [this](beast::error_code ec, std::size_t) {
      if (ec) return finish(ec.message());
      queue_.pop_front();
      if (!queue_.empty() && !done_) write_next();
    });
  }

  void finish(std::string error) {
    if (done_) return;
    done_ = true;
    if (error_.empty()) error_ = std::move(error);
    beast::error_code ignored;
    input_.cancel(ignored);
    signals_.cancel(ignored);
    eof_timer_.cancel();
    beast::get_lowest_layer(ws_).cancel();
  }

  Ws& ws_;
  net::posix::stream_descriptor input_;
  net::signal_set signals_;
  net::steady_timer eof_timer_;
  beast::flat_buffer in_;
  std::array<char, 16 * 1024> stdin_buf_{};
  std::deque<std::pair<bool, std::string>> queue_;
  std::optional<int> exit_code_;
  std::string error_;
  bool closing_ = false;
  bool done_ = false;
};

// The daemon refused the credentials at the handshake; the caller may renew them and retry.
struct refused {
  response answer;
};

template <class Ws>
void handshake(net::io_context& ioc, Ws& ws, const api_client& api, const std::string& target, const std::string& token) {
  ws.set_option(websocket::stream_base::decorator([&](websocket::request_type& req) {
    req.set(beast::http::field::authorization, "Bearer " + token);
    req.set(beast::http::field::user_agent, "sandfort-cli/0.1");
  }));
  websocket::response_type res;
  beast::error_code ec;
  beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(15));
  ws.async_handshake(res, api.host() + ":" + api.port(), target, [&](beast::error_code e) { ec = e; });
  ioc.run();
  ioc.restart();
  beast::get_lowest_layer(ws).expires_never();
  if (!ec) return;
  if (res.result_int() != 0 && res.result_int() != 101) {
    response r;
    r.status = res.result_int();
    r.body = res.body();
    r.request_id = std::string(res["X-Request-Id"]);
    if (r.status == 401) throw refused{r};
    throw_api_error(r);
  }
  throw failure("opening the terminal failed: " + ec.message());
}

template <class Ws>
int run_terminal(net::io_context& ioc, Ws& ws, const api_client& api, const std::string& target,
                 const std::string& token) {
  handshake(ioc, ws, api, target, token);
  ws.binary(true);
  std::optional<int> exit_code;
  std::string error;
  {
    raw_terminal raw;
    session<Ws> sess(ioc, ws);
    sess.start();
    ioc.run();
    exit_code = sess.exit_code();
    error = sess.error();
  }
  if (exit_code) return *exit_code;
  throw failure("the terminal closed without an exit status" + (error.empty() ? std::string() : ": " + error));
}

int open_terminal(const api_client& api, const std::string& target, const std::string& token) {
  net::io_context ioc;
  sandfort::http::any_stream conn(ioc.get_executor());
  connect_tcp(ioc, conn, api.host(), api.port(), api.base_url());
  std::optional<net::ssl::context> ctx;
  if (api.tls()) {
    ctx.emplace(make_tls_context());
    tls_handshake(ioc, conn, *ctx, api.host(), api.base_url());
  }
  websocket::stream<sandfort::http::any_stream> ws(std::move(conn));
  return run_terminal(ioc, ws, api, target, token);
}

}  // namespace

int cmd_shell(const std::string& id, const std::string& command) {
  api_client api = connect_api();
  auto [cols, rows] = terminal_size();
  std::string target = api.prefix() + "/v1/sandboxes/" + url_encode(id) + "/pty?cols=" + std::to_string(cols) +
                       "&rows=" + std::to_string(rows);
  if (!command.empty()) target += "&command=" + url_encode(command);
  std::string token = api.bearer();
  try {
    return open_terminal(api, target, token);
  } catch (const refused& r) {
    if (!api.renew(token)) throw_api_error(r.answer);
  }
  try {
    return open_terminal(api, target, api.bearer());
  } catch (const refused& r) {
    throw_api_error(r.answer);
  }
}

}  // namespace sandfort::cli
