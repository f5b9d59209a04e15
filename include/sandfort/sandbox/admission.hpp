#pragma once
// Admission (src/sandbox/admission.cpp, host_admission.cpp; docs/guardrails.md, docs/limits.md):
// whether an organization may have a sandbox running (its kill switch, image and runtime policies
// and quotas)
// and whether the host can hold its memory; the organization's limits and their use; the kill
// switch; the reaper that stops sandboxes past their TTL or idle timeout and deletes them after a
// grace period. Every decision is in the organization's audit chain. It stops and deletes
// sandboxes through the lifecycle (sandbox_stopper), and knows nothing else of it.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "sandfort/audit/journal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/sandbox/activity.hpp"
#include "sandfort/sandbox/host_memory.hpp"
#include "sandfort/sandbox/sandbox_stopper.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/sandbox/warm_pool.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/guardrail_store.hpp"
#include "sandfort/store/resource_store.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

class admission {
 public:
  admission(boost::asio::any_io_executor executor, const config& cfg, store::database& db, const clock& clk,
            activity_tracker& activity, host_memory& host, warm_pool& pool, sandbox_stopper& lifecycle);
  admission(const admission&) = delete;
  admission& operator=(const admission&) = delete;

  // --- What the organization's administrators (through the API) and the daemon ask. ---
  // The organization's limits (its own or the configured defaults), its use and its kill switch.
  result<org_guardrails_view> guardrails(const std::string& org_id);
  result<org_guardrails_view> set_limits(const std::string& org_id, const limits_update& update, const audit::actor& who);
  // The organization's egress defaults (docs/egress.md): the policy of a sandbox created without
  // egress fields of its own; nullopt when it has none (such a sandbox gets no egress). Setting
  // nullopt removes them; sandboxes created before keep the policy they were created with.
  result<std::optional<proxy::egress_rule_set>> egress_defaults(const std::string& org_id);
  result<std::optional<proxy::egress_rule_set>> set_egress_defaults(const std::string& org_id,
                                                                    const std::optional<proxy::egress_rule_set>& set,
                                                                    const audit::actor& who);
  // The kill switch: from now on no sandbox of the organization is created or started, and every
  // running one is stopped, all at once. Lifted only by the superadmin when the superadmin set it.
  task<stop_all_report> stop_all(const std::string& org_id, bool by_superadmin, const audit::actor& who);
  result<void> lift_stop(const std::string& org_id, bool by_superadmin, const audit::actor& who);
  // Stops sandboxes past their TTL or idle timeout and deletes those whose grace period is over;
  // the daemon runs it periodically. Returns how many sandboxes it stopped or deleted.
  boost::asio::awaitable<int> reap();

  // --- What the lifecycle and the warm pool ask before a sandbox or a member holds anything. ---
  // The runtime a create that names none runs on (default_runtime_of in types.hpp): the
  // configured default, or the first the organization's runtime policy allows when that is not it.
  result<std::string> default_runtime(const std::string& org_id);
  // Whether the organization may have this sandbox running: its kill switch, its runtime policy,
  // its image policy (for a new one) and its quotas. `restarting`: the id of a stopped sandbox
  // being started (it is counted already). A refusal is recorded in the organization's audit chain.
  // `own_snapshot`: the image is one of the organization's snapshots, which the image policy does
  // not cover (the runtime policy does).
  result<void> admit(const std::string& org_id, const sandbox_spec& spec, const std::string& image,
                     const std::string& restarting, const audit::actor& who, bool own_snapshot = false);
  // Whether the host can hold `memory_mb` more beside every organization's sandboxes that hold
  // memory and the warm pool's members; checked after admit() with nothing awaited before the
  // row (or the start mark) exists. `may_evict`: waiting pool members are removed to make room.
  // A refusal is host_full, recorded in the organization's audit chain.
  result<void> admit_to_host(const std::string& org_id, std::int64_t memory_mb, const std::string& restarting,
                             const audit::actor& who, bool may_evict);
  // The pool's gate: room for one more member of `pool`.
  result<void> host_room_for_member(const pool_config& pool);

  // A stopped sandbox being started: the quotas and the host count it as running from
  // begin_start() (which follows admit() with no co_await between, so two starts see each other)
  // until the mark is destroyed, started or not. Holds the set, not admission: a start
  // suspended at shutdown may be destroyed after it.
  class start_mark {
   public:
    start_mark(std::shared_ptr<std::set<std::string>> starting, std::string sandbox_id);
    start_mark(const start_mark&) = delete;
    start_mark& operator=(const start_mark&) = delete;
    ~start_mark();

   private:
    std::shared_ptr<std::set<std::string>> starting_;
    std::string sandbox_id_;
  };
  start_mark begin_start(const std::string& sandbox_id) { return start_mark(starting_, sandbox_id); }
  // Whether a start of the sandbox is under way (a second one is a 409).
  bool starting(const std::string& sandbox_id) const { return starting_->contains(sandbox_id); }

 private:
  org_limits limits_of(const store::org_guardrails& own) const;
  // Memory limits of every organization's sandboxes that run, are paused, are being made or
  // are being started, in MiB.
  result<std::int64_t> sandbox_memory_held_mb();

  boost::asio::any_io_executor executor_;
  const config& cfg_;
  store::sandbox_store sandboxes_;
  store::guardrail_store guardrails_;
  store::resource_store resources_;
  const clock& clock_;
  audit::journal journal_;
  activity_tracker& activity_;
  host_memory& host_;
  warm_pool& pool_;
  sandbox_stopper& lifecycle_;
  std::shared_ptr<std::set<std::string>> starting_ = std::make_shared<std::set<std::string>>();
};

}  // namespace sandfort::sandbox
