#pragma once
// The doors home (docs/architecture.md, "The agent dials home"): for each sandbox that is reached
// through links it dials, one listening unix socket, `<root>/<sandbox id>/home.sock`, in a
// directory only sandfortd writes, mounted read-only into that sandbox's container and no other.
// This is the one place that authenticates the far end: a link accepted on sandbox A's socket
// is sandbox A's, whatever it says. Each link's hello (hello.hpp) says what it is for: `agent`
// links wait in the pool, `tunnel` links go to the egress proxy.
// Used on the io_context's thread only.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/home/hello.hpp"
#include "sandfort/home/pool.hpp"
#include "sandfort/http/any_stream.hpp"

namespace sandfort::home {

struct door_options {
  std::string root;  // one directory per sandbox under it; made 0711 if missing
  // Links of one sandbox that are still saying hello, and tunnels it has open: one more is
  // closed as it arrives. (Idle agent links are capped by the pool; links in use by calls are
  // as many as the calls sandfortd makes.)
  std::size_t max_greeting = 16;
  std::size_t max_tunnels = 256;
  std::chrono::milliseconds hello_timeout = home::hello_timeout;
};

// Serves one `tunnel` link of a sandbox, the sandbox proven by the door. The link is the
// handler's: it closes it when the sandbox goes (the egress proxy's disconnect()).
using tunnel_handler = std::function<boost::asio::awaitable<void>(const std::string& sandbox_id, http::any_stream link)>;

class doors {
 public:
  doors(boost::asio::io_context& ioc, door_options options, link_pool& pool, tunnel_handler tunnels);
  ~doors();
  doors(const doors&) = delete;
  doors& operator=(const doors&) = delete;

  // Opens the sandbox's door (again: a door already open is closed first): its directory (kept
  // when it exists: a running container has it mounted) with a new home.sock listening in it.
  // Returns the directory, which the container mounts read-only at /run/sandfort/home.
  result<std::string> open(const std::string& sandbox_id);
  // The sandbox stopped or is gone: closes its listener and every link it has open, drops its
  // idle links from the pool, and removes its socket and directory.
  void close(const std::string& sandbox_id);
  // Closes every door (the daemon stops). The directories stay, mounted in running containers:
  // the next start opens the doors in them again, and the agents dial again.
  void close_all();
  bool is_open(const std::string& sandbox_id) const;
  // Links of the sandbox that are saying hello or tunnelling now.
  std::size_t busy_links(const std::string& sandbox_id) const;

  struct door;

 private:
  boost::asio::io_context& ioc_;
  door_options options_;
  link_pool& pool_;
  tunnel_handler tunnels_;
  std::map<std::string, std::shared_ptr<door>> open_;
};

}  // namespace sandfort::home
