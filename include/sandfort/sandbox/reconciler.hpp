#pragma once
// Keeping the database and Docker in agreement: start-up reconciliation (src/sandbox/reconcile.cpp)
// and Docker's event stream afterwards (src/sandbox/container_events.cpp). It changes rows only
// through the lifecycle's own transitions (transitions.hpp: one path for audit events and woken
// waiters), and stands aside while the lifecycle works on a sandbox's container (the operation
// marks it keeps, operation_marks.hpp).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/activity.hpp"
#include "sandfort/sandbox/network.hpp"
#include "sandfort/sandbox/operation_marks.hpp"
#include "sandfort/sandbox/transitions.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/sandbox/warm_pool.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

struct reconcile_report {
  int containers_removed = 0;   // labelled as ours but without a live row
  int rows_marked_error = 0;    // container vanished, or the daemon died mid-create
  int rows_marked_stopped = 0;  // container exists but is not running
  // Volumes and snapshot images: Docker's side of them.
  int volumes_removed = 0;          // labelled as ours but without a live volume row
  int images_removed = 0;           // labelled as ours but without a live snapshot row
  int orphans_kept = 0;             // without a row, but still used (or not removable): left, logged
  int volume_rows_missing = 0;      // live volume rows whose Docker volume is gone (logged only)
  int snapshot_rows_missing = 0;    // live snapshot rows whose image is gone (logged only)
};

class reconciler final : public operation_marks {
 public:
  reconciler(boost::asio::any_io_executor executor, const config& cfg, store::database& db, docker::engine& engine,
             const clock& clk, network_service& net, activity_tracker& activity, warm_pool& pool,
             transitions& lifecycle);

  // Run once before serving: brings Docker's state and the database into agreement.
  task<reconcile_report> reconcile();
  // Not ready (and no create or start) until reconcile() has finished.
  bool reconciled() const { return reconciled_; }

  // Follows the engine's events about our containers (die, oom, destroy, stop, start, pause,
  // unpause) and the sandbox network (connect, disconnect) until cancelled, and brings each row it
  // concerns in line with what inspect says: a container that exited stops its row, one removed
  // behind our back makes it `error`, one off the network loses its address, one paused or thawed
  // outside sandfortd makes it `paused` or `started`; relays, tunnels and the agent connection
  // close with it. Spawn it before reconcile(): it replays from the moment it was called, so
  // nothing that happens during reconciliation is missed. Reconnects with back-off.
  boost::asio::awaitable<void> follow_container_events();

  // While the lifecycle works on a sandbox's container (stop, delete, pause, a snapshot's commit),
  // the events it causes are its own: the follower leaves that row alone and looks again once the
  // last mark is gone.
  using operation_mark = operation_marks::mark;

 private:
  // What arrived while the sandbox was marked is judged now.
  void operations_ended(const std::string& sandbox_id) override;
  boost::asio::awaitable<void> on_container_event(const docker::engine_event& ev);
  // Inspects the row's container and brings the row in line; events are only the reason to look.
  // By value: it also runs detached (from operations_ended), past the life of its caller's strings.
  boost::asio::awaitable<void> recheck_sandbox(std::string sandbox_id);
  // Every started or stopped row: after a lost event or a stream that broke. Runs beside the
  // stream (which goes on meanwhile), one at a time; requests while one runs fold into one more.
  void request_recheck_all();
  boost::asio::awaitable<void> recheck_all();
  // A container took `address` on the sandbox network: no other row may still claim it.
  boost::asio::awaitable<void> release_address(std::string address, std::string holder_container);

  boost::asio::any_io_executor executor_;
  const config& cfg_;
  store::database& db_;  // the instance id, volumes and snapshots
  store::sandbox_store sandboxes_;
  docker::engine& engine_;
  const clock& clock_;
  network_service& net_;
  activity_tracker& activity_;
  warm_pool& pool_;
  transitions& transitions_;

  bool reconciled_ = false;
  std::set<std::string> deferred_;  // marked rows that events arrived for
  bool rechecking_all_ = false;
  bool recheck_all_again_ = false;
  std::set<std::string> oom_seen_;  // containers with an oom event whose die is still to come
};

}  // namespace sandfort::sandbox
