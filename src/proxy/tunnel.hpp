#pragma once
// Splicing bytes between a client and its upstream until both sides are done, either side
// fails, or nothing moves for the idle timeout.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "sandfort/http/any_stream.hpp"

namespace sandfort::proxy::detail {

struct tunnel {
  tunnel(http::any_stream::socket_type& from_client, http::any_stream::socket_type& to_upstream,
         std::chrono::milliseconds idle_after, bool ends_with_upstream)
      : client(from_client), upstream(to_upstream), idle_timeout(idle_after), end_with_upstream(ends_with_upstream) {}

  http::any_stream::socket_type& client;
  http::any_stream::socket_type& upstream;
  std::chrono::milliseconds idle_timeout;
  // A forwarded request is over when the upstream's answer ends: nothing more the client sends
  // may reach anything. A CONNECT tunnel carries half-closes through instead.
  bool end_with_upstream;

  std::uint64_t bytes_in = 0;   // upstream → client
  std::uint64_t bytes_out = 0;  // client → upstream
  std::string response_start;   // the upstream's first bytes (its status line, if HTTP)
  bool reset = false;           // a read or write failed (other than a clean end of stream)
  bool idle = false;            // closed by the idle timeout
  bool closed = false;          // we closed both sockets (errors after that are ours, not a reset)
  std::chrono::steady_clock::time_point last_activity{};
};

// Returns with both sockets closed.
boost::asio::awaitable<void> splice(tunnel& t);

}  // namespace sandfort::proxy::detail
