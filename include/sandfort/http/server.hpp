#pragma once
// An HTTP/1.1 server over TCP or a unix socket: one coroutine per connection, keep-alive,
// idle and header timeouts, a body limit (413), a request id on every response, and a
// graceful stop (no new connections; in-flight requests finish; idle ones close).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/http/router.hpp"
#include "sandfort/http/stream.hpp"

namespace sandfort::http {

struct server_options {
  std::uint64_t body_limit = 16u << 20;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::string server_name = "sandfort";
  // Take the caller's X-Request-Id (the agent does: its only caller is sandfortd, so one id
  // follows a request through both).
  bool trust_request_id = false;
};

class server {
 public:
  server(boost::asio::io_context& ioc, server_options options, handler root);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // "127.0.0.1:8080" (port 0 picks a free one). Returns the bound port.
  result<unsigned short> listen_tcp(const std::string& host_port);
  // Removes a stale socket file first; the caller owns the directory and its permissions.
  result<void> listen_unix(const std::string& path);

  // Requests the selector claims are handed over after their header (see stream.hpp).
  void set_stream_selector(stream_selector<tcp_protocol> selector);
  void set_stream_selector(stream_selector<unix_protocol> selector);

  void stop();
  std::size_t active_connections() const;
  // Completes when no connection is left or the deadline passes.
  boost::asio::awaitable<void> drain(std::chrono::milliseconds deadline);

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace sandfort::http
