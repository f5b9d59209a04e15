#pragma once
// Connections to agents kept open between calls (exec's whole answers, health, ports, claim, and
// forwarded requests read to their end), so that a call reuses one instead of opening, verifying
// and closing a socket each time.
//
// Reuse is as safe as the first use: the check that the listener is in the sandbox's container
// (agent_socket.hpp: openat2 inside its root, SO_PEERCRED in its pid namespace) was made when the
// connection was opened, and a connected unix socket stays bound to the socket that accepted it —
// nothing the sandbox does later (replace agent.sock, start another server) moves an open
// connection elsewhere. What can change is that the agent closed its end or wrote something
// unasked: take() checks that without blocking and discards such a connection.
//
// Bounds: a few per sandbox, a total, an idle timeout (under the agent's own, 60 s), and none
// kept for a sandbox the connector forgot (stopped, deleted, died) or whose container changed.
// Private to the sandbox module; used on the I/O thread only.

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "sandfort/sandbox/agent_connector.hpp"

namespace sandfort::sandbox {

struct idle_options {
  std::size_t per_sandbox = 4;
  std::size_t total = 256;
  std::chrono::milliseconds timeout{10'000};
};

// Whether a connection nobody is reading from is still open and has sent nothing: a peek that
// would block. EOF, an error or unexpected bytes all mean it is not fit for another request.
bool still_quiet(agent_stream& stream);

class idle_connections {
 public:
  using clock = std::chrono::steady_clock;

  explicit idle_connections(idle_options options = {}) : options_(options) {}

  // The most recently parked connection to that sandbox's container that is still quiet, or
  // none. Connections parked for another container of the sandbox are closed.
  std::optional<agent_stream> take(const std::string& sandbox_id, const std::string& container_id,
                                   clock::time_point now);
  // Keeps a connection whose last answer was read whole; closes it when the bounds are reached.
  void park(const std::string& sandbox_id, const std::string& container_id, agent_stream stream,
            clock::time_point now);
  // Closes every connection kept for that sandbox.
  void forget(const std::string& sandbox_id);
  std::size_t size() const { return count_; }

 private:
  struct parked {
    agent_stream stream;
    clock::time_point since;
  };
  struct kept {
    std::string container_id;
    std::deque<parked> items;  // oldest first (a deque: a stream moves but is not assignable)
  };

  // Closes what has been idle too long everywhere, at most once a second: a sandbox nobody
  // calls any more does not hold its connections until it stops.
  void sweep(clock::time_point now);
  void drop(kept& k, std::size_t n);

  idle_options options_;
  std::map<std::string, kept> by_sandbox_;
  std::size_t count_ = 0;
  clock::time_point last_sweep_{};
};

}  // namespace sandfort::sandbox
