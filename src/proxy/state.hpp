#pragma once
// What the proxy's coroutines share: the options, the live connections (so stop() and
// disconnect() can close them) and the counters. One thread touches it, so no locks.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "admission.hpp"
#include "sandfort/http/any_stream.hpp"
#include "sandfort/http/server.hpp"
#include "sandfort/proxy/proxy.hpp"

namespace sandfort::proxy {

namespace detail {

// One client connection and, once dialed, its upstream.
class connection {
 public:
  explicit connection(boost::asio::ip::tcp::socket socket);
  // A tunnel link home: the sandbox is the one whose door it came through.
  connection(http::any_stream link, std::string sandbox);

  // An intercepted connection's TLS contexts: declared before the streams, so they outlive them.
  std::shared_ptr<boost::asio::ssl::context> client_tls, upstream_tls;
  boost::asio::ip::address peer;     // the client's address, as accepted (before client takes the socket)
  http::any_stream client;
  http::any_stream upstream;
  boost::beast::flat_buffer buffer;  // bytes read past the request head go upstream first
  boost::beast::flat_buffer upstream_buffer;  // an intercepted connection's: read past a response head
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::string sandbox_id;            // set once authenticated: disconnect() finds it by this
  std::optional<std::string> proven_sandbox;  // a link home's: no credential is asked for
  // Until authenticated the connection holds a pending slot of its source; after, a tunnel
  // slot. serve() gives back whichever it holds when the connection ends.
  std::optional<boost::asio::ip::address> pending_source;
  bool holds_tunnel = false;
  bool forget_traffic = false;       // the sandbox was disconnected: count only the totals
  bool linger = false;               // answered early: drain the client's input before closing
  bool intercepted = false;          // both streams are TLS now (docs/secrets.md): read through them
  // Bytes the upstream proxy's answer to our CONNECT came with: the destination's first bytes
  // (a server that speaks first), which go to the client before anything else from upstream.
  std::string upstream_early;

  // Closes both sockets and wakes any wait; `why` becomes the end reason of an open tunnel.
  void close(std::string why);
  bool closing() const { return closed_because_.has_value(); }
  const std::optional<std::string>& closed_because() const { return closed_because_; }
  // A wait that completes when close() is called; for waits that are on no socket.
  boost::asio::awaitable<void> until_closed();

 private:
  boost::asio::steady_timer closed_signal_;  // never expires: close() cancels it
  std::optional<std::string> closed_because_;
};

}  // namespace detail

struct egress_proxy::state {
  boost::asio::io_context& ioc;
  proxy_options options;
  egress_policy policy;
  egress_directory& directory;
  name_resolver& resolver;
  std::function<void(const egress_event&)> on_decision;
  interception_directory* interception = nullptr;
  std::shared_ptr<boost::asio::ssl::context> upstream_context;
  bool stopping = false;
  std::vector<std::shared_ptr<boost::asio::ip::tcp::acceptor>> acceptors;
  std::list<detail::connection*> connections;
  detail::admission admission;  // the caps on pending connections and tunnels
  http::accept_backoff backoff;
  traffic total;
  std::unordered_map<std::string, traffic> per_sandbox;

  state(boost::asio::io_context& io, proxy_options o, egress_directory& d, name_resolver& r);
};

namespace detail {

// Serves one accepted connection to its end: one request, one decision. The accept loop took a
// pending slot for `source`; serve gives it back.
boost::asio::awaitable<void> serve(std::shared_ptr<egress_proxy::state> st, boost::asio::ip::tcp::socket socket,
                                   boost::asio::ip::address source);
// Serves a tunnel link of `sandbox_id` (egress_proxy::serve_link).
boost::asio::awaitable<void> serve_link(std::shared_ptr<egress_proxy::state> st, http::any_stream link,
                                        std::string sandbox_id);

// Logs the decision, counts it and hands it to on_decision.
void report(egress_proxy::state& st, const connection& c, egress_event& ev);
}  // namespace detail

}  // namespace sandfort::proxy
