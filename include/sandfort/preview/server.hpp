#pragma once
// The preview listener: `http://<port>-<sandbox id>.<preview domain>/…` is proxied to that port
// of the sandbox's container on the sandbox network (or, for a sandbox with no network
// interface, to that port of its loopback through its agent), plain HTTP and WebSockets alike,
// with no expose call. Every request on a connection is checked and routed on its own.
//
// Answers of its own are short text pages: 400 not a preview address, 401 no or wrong token,
// 403 a WebSocket opened with the cookie from a page outside the sandbox, 404 no such sandbox,
// 503 sandbox not started, 502 nothing answering on that port.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/http/server.hpp"
#include "sandfort/preview/address.hpp"

namespace sandfort::preview {

// What the preview needs to know of a sandbox.
struct preview_target {
  std::string sandbox_id;
  std::string state;    // "started", "stopped", …: only started sandboxes are proxied to
  std::string address;  // the container's IPv4 address on the sandbox network
  bool public_preview = false;
  std::string key;      // make_token's key
  // No address at all (a gVisor sandbox): its ports are reached through its agent
  // (preview_options::open_port).
  bool dials_home = false;
};

// The seam to the sandbox service. Called on the io_context's thread, once per request.
class preview_directory {
 public:
  virtual ~preview_directory() = default;
  // nullopt: unknown or deleted.
  virtual std::optional<preview_target> find(const std::string& sandbox_id) = 0;
};

struct preview_options {
  std::string domain = "preview.localhost";
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};  // between requests on a kept-alive connection
  // Open connections, and idle ones (no complete request header yet) per source and in total: see
  // http::server_options.
  std::size_t max_connections = 1024;
  std::size_t max_idle_per_source = 64;
  std::size_t max_idle = 512;
  // Whom a connection counts against before its header is read; "" for a trusted proxy.
  std::function<std::string(const http::peer& from)> idle_source;
  // X-Forwarded-Proto towards the app: "https" when sandfortd's own TLS front serves previews.
  std::string forwarded_proto = "http";
  // Who a request comes from (the TLS front's client); empty: the TCP peer.
  std::function<std::string(const http::peer& from, std::string_view forwarded_for)> client_address;
  // A connection to a port on the loopback of a sandbox that dials home, made by its agent;
  // unavailable when nothing listens there. Empty: such sandboxes have no previews.
  std::function<boost::asio::awaitable<result<http::any_stream>>(const std::string& sandbox_id, unsigned short port)>
      open_port;
};

// Used from the io_context's thread only. The directory must outlive the server.
class preview_server {
 public:
  preview_server(boost::asio::io_context& ioc, preview_options options, preview_directory& directory);
  ~preview_server();
  preview_server(const preview_server&) = delete;
  preview_server& operator=(const preview_server&) = delete;

  // "127.0.0.1:8081" (port 0 picks a free one). Returns the bound port.
  result<unsigned short> listen(const std::string& host_port);

  // Closes the listener, idle connections and every open relay; requests still being answered
  // by the server itself finish.
  void stop();
  // Completes when no connection is left, or cuts what is left at the deadline.
  boost::asio::awaitable<void> drain(std::chrono::milliseconds deadline);

  // The sandbox was deleted: closes its open relays (WebSockets included) now. Its next
  // requests are refused by the directory's answer.
  void disconnect(const std::string& sandbox_id);

  // Requests being relayed to an upstream (connecting, streaming, or spliced).
  std::size_t open_relays() const;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace sandfort::preview
