#pragma once
// sandfortd → agent: forwards a streamed request to a server on a unix socket and relays its
// answer back. Bodies flow in pieces both ways (never whole in memory), chunked or not;
// server-sent events pass as they are produced; a WebSocket upgrade becomes a byte splice.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>

#include "sandfort/http/stream.hpp"

namespace sandfort::http {

struct proxy_target {
  std::string socket_path;
  std::string target;  // path and query on the upstream
  std::chrono::milliseconds connect_timeout{2'000};
  // When the caller authenticated through Sec-WebSocket-Protocol: not forwarded (it carries
  // the token), and echoed on the 101 answer as the protocol chosen.
  std::string websocket_protocol;
};

// Returns whether the client connection may serve another request. An upstream that cannot be
// reached is answered with 503 in the API's error shape.
boost::asio::awaitable<bool> proxy_to_unix(exchange<tcp_protocol>& ex, proxy_target target);

}  // namespace sandfort::http
