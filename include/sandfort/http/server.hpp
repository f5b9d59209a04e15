#pragma once
// An HTTP/1.1 server over TCP or a unix socket: one coroutine per connection, keep-alive,
// idle and header timeouts, a body limit (413), a request id on every response, a cap on open
// connections, and a graceful stop (no new connections; idle ones close at once; in-flight
// requests, streamed ones included, finish until drain()'s deadline cuts them).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/http/router.hpp"
#include "sandfort/http/stream.hpp"

namespace sandfort::http {

// Where a listener's warnings go. The http module has no log sink of its own (the static
// agent links it), so a daemon hands in spdlog; empty means silent.
using warning_log = std::function<void(const std::string&)>;

// A connection's TCP peer ("unix", port 0, on a unix socket).
struct peer {
  std::string address;
  unsigned short port = 0;
};

struct server_options {
  std::uint64_t body_limit = 16u << 20;
  // From accept (or, on a kept-alive connection, from the next request's first byte) until the
  // request's header is complete, however slowly its bytes come: one deadline for the whole head.
  std::chrono::milliseconds header_timeout{10'000};
  // Between requests on a kept-alive connection, and for a request's body.
  std::chrono::milliseconds idle_timeout{60'000};
  std::string server_name = "sandfort";
  // Take the caller's X-Request-Id (the agent does: its only caller is sandfortd, so one id
  // follows a request through both).
  bool trust_request_id = false;
  // Open connections. At the cap a new connection closes the oldest idle one (below); when every
  // one is busy the server stops accepting until one closes or turns idle (the kernel's backlog
  // holds the next ones meanwhile, so a flood costs no descriptor of ours).
  std::size_t max_connections = 1024;
  // Idle connections (accepted or kept alive, without a complete request header: no work), per
  // source and in total. One more closes the oldest idle one (of its own source for the
  // per-source cap), so that no one can keep others out by holding idle connections.
  std::size_t max_idle_per_source = 64;
  std::size_t max_idle = 512;
  // The source a connection's idle slot counts against, given its TCP peer (the client behind the
  // TLS front); "" for a trusted proxy, which speaks for many clients: its connections count in
  // max_idle only. Empty function: the peer's address. Counted by source_key() (admission.hpp).
  std::function<std::string(const peer& from)> idle_source;
  std::string listener_name = "http";  // names the listener in warnings ("api", "preview")
  std::string config_prefix;           // of the keys warnings name ("preview." on the preview listener)
  // Who a request comes from (context::remote, exchange::remote): given the TCP peer and the
  // request's X-Forwarded-For (empty when absent). Empty function: the peer's address.
  std::function<std::string(const peer& from, std::string_view forwarded_for)> client_address;
  warning_log log_warning;
};

// What an accept loop does after a failed accept. Running out of descriptors or memory
// (EMFILE, ENFILE, ENOBUFS, ENOMEM) does not clear by retrying at once: the connection stays in
// the backlog, the acceptor stays readable, and the loop would spin on a full CPU. So it pauses,
// and says so at most once per log period. A connection that failed on its own (ECONNABORTED,
// EPROTO, ...) is skipped without a pause; anything unexpected pauses too.
class accept_backoff {
 public:
  explicit accept_backoff(std::string listener, warning_log log = {},
                          std::chrono::milliseconds pause = std::chrono::milliseconds(100),
                          std::chrono::milliseconds log_period = std::chrono::seconds(5));

  // Completes once the loop may accept again.
  boost::asio::awaitable<void> after(const boost::system::error_code& ec);
  // Logs "<listener>: <what>" unless a line went out within the log period (cap reached, ...).
  void warn_limited(const std::string& what);
  std::uint64_t failures() const { return failures_; }

 private:
  std::string listener_;
  warning_log log_;
  std::chrono::milliseconds pause_;
  std::chrono::milliseconds log_period_;
  std::optional<std::chrono::steady_clock::time_point> last_line_;       // of an accept failure
  std::optional<std::chrono::steady_clock::time_point> last_limit_line_;  // of warn_limited
  std::uint64_t failures_ = 0;
  std::uint64_t unlogged_ = 0;  // failures since the last line
};

// "127.0.0.1:8080", "[::]:443": a listen address (the host must be an IP address).
result<boost::asio::ip::tcp::endpoint> parse_listen_address(const std::string& host_port);
// A TCP acceptor bound and listening on HOST:PORT (SO_REUSEADDR); "cannot listen on ..." otherwise.
result<boost::asio::ip::tcp::acceptor> listen_on(boost::asio::io_context& io, const std::string& host_port);

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
  void set_stream_selector(stream_selector selector);

  // Serves a connection the server did not accept — a link the agent dialed home
  // (src/agent/home) — exactly as an accepted one, counted among its connections, until it
  // closes. Its header timeout starts now: hand it over once its first bytes have come.
  boost::asio::awaitable<void> serve(any_stream connection, peer from);

  // Stops accepting and closes every connection that waits for (or is reading) a request
  // header, and WebSockets. A connection inside a request carries on — a streamed exec keeps
  // streaming — and closes once its response is written.
  void stop();
  // Cuts every connection now, in-flight requests included (their sockets are shut down, so
  // a stream's next write fails and a wait on its client ends).
  void abort();
  std::size_t active_connections() const;
  // Completes when no connection is left. When the deadline passes first, abort() cuts the
  // rest and it waits a moment for them to unwind.
  boost::asio::awaitable<void> drain(std::chrono::milliseconds deadline);
  // Accepts that failed (EMFILE and the like), over the server's life.
  std::uint64_t accept_failures() const;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace sandfort::http
