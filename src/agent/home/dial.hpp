#pragma once
// The agent's side of the links home (docs/architecture.md, "The agent dials home"), for a
// sandbox with no network interface: sandfortd cannot connect to it, so the agent connects out
// to its sandbox's door, /run/sandfort/home/home.sock.
//
// - It keeps `idle_target` `agent` links dialed and waiting. A link whose first bytes arrive is
//   a call: the agent's own HTTP server serves it, and a new link is dialed in its place.
// - It listens for the sandbox's HTTP_PROXY on 127.0.0.1 (`egress_listen`): each client
//   connection becomes a `tunnel` link, its bytes passed both ways unchanged; sandfortd's proxy
//   answers it as it answers a runc sandbox's.

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/http/server.hpp"

namespace sandfort::agent::home {

struct dial_options {
  std::string door = "/run/sandfort/home/home.sock";
  std::size_t idle_target = 4;
  std::size_t max_links = 64;  // agent links at once, idle and serving: past it, calls wait
  std::string egress_listen = "127.0.0.1:3128";  // empty: no egress
  std::size_t max_tunnels = 256;
};

// Starts dialing (and listening for egress) on `ioc`; the server serves the calls. Returns the
// egress port (0: none). Fails only when the egress address cannot be listened on; a door that
// does not answer yet is dialed again (backing off to 2 s).
result<unsigned short> dial_home(boost::asio::io_context& ioc, dial_options options, http::server& server);

}  // namespace sandfort::agent::home
