#pragma once
// Helpers for the http tests: driving one coroutine on a local io_context, a server running on
// a background thread, and a raw POSIX client that sees exactly what the server put on the wire.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "sandfort/http/server.hpp"

namespace sandfort::http::test {

namespace asio = boost::asio;

// Runs work to completion on ioc (which may also serve a server); throws when it does not
// finish within limit, so a hang fails the test instead of stalling it.
template <typename T>
T run_on(asio::io_context& ioc, asio::awaitable<T> work, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  std::optional<T> out;
  std::exception_ptr failure;
  asio::co_spawn(
      ioc, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(work)); },
      [&](std::exception_ptr e) {
        failure = e;
        ioc.stop();
      });
  ioc.restart();
  ioc.run_for(limit);
  if (failure) std::rethrow_exception(failure);
  if (!out) throw std::runtime_error("the coroutine did not finish in time");
  return std::move(*out);
}

// A server on 127.0.0.1:<ephemeral> whose io_context runs on its own thread. Test code talks
// to it only over sockets, or through on_server_thread().
class running_server {
 public:
  running_server(server_options options, handler root) : server_(ioc_, std::move(options), std::move(root)) {
    auto port = server_.listen_tcp("127.0.0.1:0");
    if (!port) throw std::runtime_error("listen_tcp failed: " + port.err().message);
    port_ = *port;
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~running_server() {
    on_server_thread([this] { server_.stop(); });
    ioc_.stop();
    thread_.join();
  }
  running_server(const running_server&) = delete;
  running_server& operator=(const running_server&) = delete;

  unsigned short port() const { return port_; }
  asio::io_context& ioc() { return ioc_; }
  server& srv() { return server_; }

  // Runs fn on the server's thread and waits for it.
  template <typename F>
  auto on_server_thread(F fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto done = task.get_future();
    asio::post(ioc_, [&task] { task(); });
    if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
      throw std::runtime_error("the server thread did not run the task");
    return done.get();
  }

 private:
  asio::io_context ioc_;
  server server_;
  unsigned short port_ = 0;
  std::thread thread_;
  // Keeps run() alive while no connection or acceptor is pending.
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(ioc_);
};

struct raw_response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// A blocking TCP client with explicit deadlines on every read.
class raw_client {
 public:
  raw_client() = default;
  ~raw_client() { close(); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  // Returns 0, or the errno of a failed connect (ECONNREFUSED, ...).
  int connect(unsigned short port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return errno;
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      int err = errno;
      close();
      return err;
    }
    return 0;
  }

  // False when the peer stopped accepting bytes (reset, closed, or blocked past SO_SNDTIMEO).
  bool send_all(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      auto n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }

  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Reads one response with a Content-Length body; nullopt on EOF, reset or timeout.
  std::optional<raw_response> read_response(std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    std::size_t end;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(deadline)) return std::nullopt;
    raw_response res;
    std::string head = pending_.substr(0, end);
    pending_.erase(0, end + 4);
    auto line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    res.status = std::stoi(status_line.substr(9, 3));
    std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      auto next = head.find("\r\n", pos);
      if (next == std::string::npos) next = head.size();
      std::string line = head.substr(pos, next - pos);
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        res.headers[name] = value;
      }
      pos = next + 2;
    }
    std::size_t length = res.headers.count("content-length") ? std::stoul(res.headers["content-length"]) : 0;
    while (pending_.size() < length)
      if (!fill(deadline)) return std::nullopt;
    res.body = pending_.substr(0, length);
    pending_.erase(0, length);
    return res;
  }

  // True when the peer closes (EOF or reset) within limit without sending anything more;
  // false on a timeout or unexpected bytes.
  bool closed_within(std::chrono::milliseconds limit) {
    if (!pending_.empty()) return false;
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      char buf[4096];
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      return false;
    }
  }

 private:
  bool fill(std::chrono::steady_clock::time_point deadline) {
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      char buf[16384];
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return false;
      pending_.append(buf, static_cast<std::size_t>(n));
      return true;
    }
  }

  int fd_ = -1;
  std::string pending_;
};

inline std::string get_request(const std::string& target, const std::string& extra_headers = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n" + extra_headers + "\r\n";
}

}  // namespace sandfort::http::test
