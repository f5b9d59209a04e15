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
#include "support/raw_client.hpp"
#include "support/run_coroutine.hpp"

namespace sandfort::http::test {

namespace asio = boost::asio;

// Runs work to completion on ioc (which may also serve a server); a hang fails the test instead
// of stalling it (support/run_coroutine.hpp).
template <typename T>
T run_on(asio::io_context& ioc, asio::awaitable<T> work, std::chrono::seconds limit = std::chrono::seconds(20)) {
  return testing::run_coroutine(ioc, std::move(work), limit);
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

using sandfort::testing::raw_client;
using sandfort::testing::raw_response;

inline std::string get_request(const std::string& target, const std::string& extra_headers = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n" + extra_headers + "\r\n";
}

}  // namespace sandfort::http::test
