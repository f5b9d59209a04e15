#pragma once
// A sandbox's transitions (src/sandbox/transitions.cpp): the one path by which its row changes
// state (with its audit event, in one transaction) and by which those waiting for a change hear
// of it; removing its container; closing what a stopped or vanished sandbox leaves open. The
// lifecycle, the reconciler and the command service's "the agent cannot be reached" all change
// a sandbox through it.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/audit/journal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/network.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/guardrail_store.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

class transitions {
 public:
  // cfg: agent_start_timeout_s, how long a started container's agent has to answer.
  transitions(boost::asio::any_io_executor executor, const config& cfg, store::database& db, docker::engine& engine,
              agent_connector& agent, network_service& net, const clock& clk);
  transitions(const transitions&) = delete;
  transitions& operator=(const transitions&) = delete;

  // The row's new state and its audit event (`action`, default "sandbox.state") in one transaction;
  // waiters woken. A stopped sandbox keeps `deadline` (a guardrail stopped it) or none; other
  // states clear it. `reason` (stop_reason, types.hpp) goes into the event's details when the
  // state is `stopped` or `error`; an `error` without one says stop_reason::error.
  result<void> set_state(store::sandbox_record& rec, const std::string& state, const std::string& message = {},
                         const audit::actor& who = audit::system_actor(), const std::string& action = {},
                         const std::optional<store::sandbox_deadline>& deadline = std::nullopt,
                         const char* reason = nullptr);

  // Wakes get(wait_for=...) callers without polling: each waits on a timer that a state change
  // cancels. Returns at the change or at `until`, whichever comes first.
  boost::asio::awaitable<void> wait_change(const std::string& sandbox_id, std::chrono::steady_clock::time_point until);

  // Starts the row's container and waits for its agent to answer; the row's address is
  // refreshed (not stored). A sandbox's or a pool member's.
  task<void> start_and_wait(store::sandbox_record& rec);

  // What the agent's transport needs on the host before (or, after a restart of sandfortd, while)
  // the container runs: the door of a sandbox that dials home (agent_connector::prepare).
  result<void> prepare_agent(const store::sandbox_record& rec);

  // Removes the sandbox's container: by id once known, else by its labels (mid-create).
  task<void> destroy_container(const store::sandbox_record& rec);

  // The sandbox stopped or is gone: its agent connection is stale, its tunnels and relays close.
  void disconnect(const std::string& sandbox_id);

  // The agent cannot be reached: a container that stopped (exit, OOM) marks the row stopped and
  // the answer says why; anything else is the error as it is.
  boost::asio::awaitable<error> explain_unreachable_agent(store::sandbox_record& rec, error e);

 private:
  void notify(const std::string& sandbox_id);
  task<void> wait_for_agent(const store::sandbox_record& rec);

  boost::asio::any_io_executor executor_;
  const config& cfg_;  // agent_start_timeout_s
  store::database& db_;  // the instance id
  store::sandbox_store sandboxes_;
  store::guardrail_store guardrails_;
  docker::engine& engine_;
  agent_connector& agent_;
  network_service& net_;
  const clock& clock_;
  audit::journal journal_;
  std::map<std::string, std::vector<std::shared_ptr<boost::asio::steady_timer>>> waiters_;
};

}  // namespace sandfort::sandbox
