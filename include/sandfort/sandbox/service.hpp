#pragma once
// The sandbox service: the lifecycle (create, get, list, stop, start, delete, pause, PATCH;
// src/sandbox/lifecycle.cpp, pause.cpp). Parts with headers of their own, reached through it: spec
// building (spec.hpp), state changes (transitions.hpp), guardrails and the TTL reaper
// (admission.hpp), disk measurement (disk_guard.hpp), commands (commands.hpp), the network side
// (network.hpp), volumes (volumes.hpp), snapshots (snapshots.hpp), the warm pool (warm_pool.hpp)
// and the reconciler (reconciler.hpp: start-up reconciliation and Docker's events). It knows the
// store, the engine and the agent connector through their interfaces, and nothing of HTTP.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "sandfort/core/clock.hpp"
#include "sandfort/audit/group_writer.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/activity.hpp"
#include "sandfort/sandbox/admission.hpp"
#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/commands.hpp"
#include "sandfort/sandbox/disk_guard.hpp"
#include "sandfort/sandbox/host_memory.hpp"
#include "sandfort/sandbox/image_resolution.hpp"
#include "sandfort/sandbox/network.hpp"
#include "sandfort/sandbox/reconciler.hpp"
#include "sandfort/sandbox/snapshots.hpp"
#include "sandfort/sandbox/spec.hpp"
#include "sandfort/sandbox/transitions.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/sandbox/volumes.hpp"
#include "sandfort/sandbox/warm_pool.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/guardrail_store.hpp"
#include "sandfort/store/resource_store.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

class service : private sandbox_stopper {
 public:
  // host: where the host's memory is read (docs/limits.md, "Host memory"); none: /proc/meminfo.
  // events: where the events of commands run in sandboxes are appended (group commits).
  service(boost::asio::any_io_executor executor, const config& cfg, store::database& db, docker::engine& engine,
          agent_connector& agent, const clock& clk, audit::group_writer& events, host_memory* host = nullptr);

  // Every change of a sandbox row is appended to its organization's audit chain in the same
  // transaction (`who`: the caller; changes the daemon makes itself are the "system"'s).
  task<sandbox_view> create(const std::string& org_id, const create_request& req, const audit::actor& who = audit::system_actor());
  // wait_for: empty, or a state to block for (up to timeout); returns the sandbox either way.
  task<sandbox_view> get(const std::string& org_id, const std::string& id_or_name, const std::string& wait_for = {},
                         std::chrono::milliseconds timeout = {});
  task<list_page> list(const std::string& org_id, const list_request& req);
  task<sandbox_view> stop(const std::string& org_id, const std::string& id_or_name, const audit::actor& who = audit::system_actor());
  task<sandbox_view> start(const std::string& org_id, const std::string& id_or_name, const audit::actor& who = audit::system_actor());
  task<void> remove(const std::string& org_id, const std::string& id_or_name,
                    const audit::actor& who = audit::system_actor()) override;
  // Freezes every process of a started sandbox (memory kept) and thaws it again (src/sandbox/pause.cpp).
  // Calls that need it running answer 409 meanwhile; stop and delete work on a paused sandbox.
  task<sandbox_view> pause(const std::string& org_id, const std::string& id_or_name, const audit::actor& who = audit::system_actor());
  task<sandbox_view> resume(const std::string& org_id, const std::string& id_or_name, const audit::actor& who = audit::system_actor());
  // PATCH: labels, ttl_s, egress_allowlist (the proxy reads it on every new connection).
  // With metrics() below, in lifecycle.cpp.
  task<sandbox_view> update(const std::string& org_id, const std::string& id_or_name, const update_request& req,
                            const audit::actor& who = audit::system_actor());

  // --- The network side (network.hpp): the sandbox network, addresses, previews, ports, and the
  // hooks that close a stopped sandbox's tunnels and relays.
  network_service& network() { return net_; }

  // Resource use of a started sandbox and its egress through the proxy.
  task<sandbox_metrics> metrics(const std::string& org_id, const std::string& id_or_name);
  // Where metrics() reads egress counts (the proxy, wired by sandfortd).
  void set_egress_meter(std::function<egress_traffic(const std::string&)> meter) { egress_meter_ = std::move(meter); }
  // An organization's interception CA certificate (PEM; made on first need), which sandboxes
  // with secrets trust (docs/secrets.md). Wired by sandfortd; unset, such creates are refused.
  void set_interception_ca(std::function<result<std::string>(const std::string& org_id)> source) {
    interception_ca_ = std::move(source);
  }

  // Commands through the agent (commands.hpp): exec, code-run, and the agent connection the api
  // module forwards sessions, background commands, files, git and the PTY over.
  command_service& commands() { return commands_; }

  // Keeping the database and Docker in agreement (reconciler.hpp): start-up reconciliation, run
  // once before serving, and Docker's event stream afterwards.
  reconciler& reconciliation() { return reconciler_; }

  // Guardrails (admission.hpp, docs/guardrails.md): the organization's limits, its use and its
  // kill switch, which the API reaches through the daemon's guardrail adapter; the reaper the
  // daemon runs periodically.
  sandbox::admission& admission() { return admission_; }
  // Disk (disk_guard.hpp, docs/limits.md "Disk"): the enforcement the daemon detects before the
  // first create, and the measuring loop it runs every disk.check_interval_s.
  disk_guard& disk() { return disk_; }
  // Where calls and previews mark a sandbox as used (the idle timeout).
  activity_tracker& activity() { return activity_; }
  // Reconciled, Docker and the store reachable; the reason otherwise.
  task<void> ready();

  // --- The warm pool (warm_pool.hpp, docs/pool.md) ---------------------------------------------
  // Starts filling the configured pools (after reconcile: it removes members of an earlier run;
  // after disk().detect_enforcement(): members are made as a create's containers are).
  void start_pool() { pool_.start(disk_.hard_enforcement()); }
  // Shutdown: no more members, and the waiting ones removed.
  boost::asio::awaitable<void> drain_pool() { return pool_.drain(); }
  std::vector<pool_status> pools() const { return pool_.status(); }

  // --- Volumes and snapshots: parts of their own (volumes.hpp, snapshots.hpp) -----------------
  volume_service& volumes() { return volumes_; }
  snapshot_service& snapshots() { return snapshots_; }

 private:
  task<void> provision(store::sandbox_record rec, std::string proxy_secret);
  // A created row whose container now runs and answers: started, unless the kill switch went on.
  task<void> finish_start(store::sandbox_record& rec);
  // Claiming the agent of a pooled sandbox (at create, and again at each start: a restarted
  // container runs a new agent).
  task<void> claim_agent(const store::sandbox_record& rec, const std::string& proxy_secret);
  // create() with a member taken from the pool: the row is inserted; claims it, or falls back
  // to a cold provision when the member does not answer.
  task<void> provision_pooled(store::sandbox_record& rec, std::string proxy_secret);
  // /work for a sandbox of a user other than root, made by the engine before the first start.
  task<void> give_default_workdir(const std::string& container_id, const sandbox_spec& spec);
  // The organization's interception CA into the container's filesystem, before its first start.
  task<void> install_interception_ca(const store::sandbox_record& rec, const sandbox_spec& spec);
  // A sandbox's spec as the audit chain keeps it: environment variables by name only (their
  // values are where secrets go), floats as text.
  static nlohmann::json spec_for_audit(const std::string& spec_json);
  result<store::sandbox_record> require_started(const std::string& org_id, const std::string& id_or_name) {
    return find_started(sandboxes_, activity_, org_id, id_or_name);
  }
  // pause() and resume(): `from` → `to` through the engine's pause or unpause, recorded as `action`.
  task<sandbox_view> freeze(const std::string& org_id, const std::string& id_or_name, bool paused,
                            const audit::actor& who);
  // Stops a started (or paused) sandbox's container and records it (sandbox_stopper.hpp).
  task<void> halt(store::sandbox_record& rec, const std::string& message, const audit::actor& who,
                  const std::optional<store::sandbox_deadline>& deadline, const char* reason) override;
  // Where this daemon makes containers now (spec.hpp): its instance, network and disk enforcement.
  container_site site() const;
  // unavailable unless the engine has the runtime gVisor sandboxes are made with (asked until
  // it has: runsc may be registered while sandfortd runs).
  task<void> gvisor_offered();
  bool gvisor_seen_ = false;
  sandbox_view view_of(const store::sandbox_record& rec) const;
  boost::asio::any_io_executor executor_;
  const config& cfg_;
  store::database& db_;  // transactions, the instance id
  store::sandbox_store sandboxes_;
  store::guardrail_store guardrails_;
  store::resource_store resources_;
  docker::engine& engine_;
  agent_connector& agent_;
  const clock& clock_;
  std::unique_ptr<host_memory> own_host_;  // when the caller gave none
  host_memory& host_;
  audit::journal journal_;
  std::function<egress_traffic(const std::string&)> egress_meter_;
  std::function<result<std::string>(const std::string&)> interception_ca_;
  activity_tracker activity_;
  network_service net_;
  transitions transitions_;
  disk_guard disk_;
  // Admission takes the pool before it is made (a reference only), the pool takes admission.
  sandbox::admission admission_;
  warm_pool pool_;
  // Declared after the parts it uses, before those that use it.
  reconciler reconciler_;
  volume_service volumes_;
  snapshot_service snapshots_;
  command_service commands_;
};

}  // namespace sandfort::sandbox
