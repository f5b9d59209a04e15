// Start-up reconciliation: Docker and the database must tell the same story before we serve.
#include <set>
#include <spdlog/spdlog.h>

#include "sandfort/core/ids.hpp"
#include "sandfort/sandbox/service.hpp"

namespace sandfort::sandbox {

task<reconcile_report> service::reconcile() {
  reconcile_report report;
  auto rows = db_.list_live_sandboxes_all_orgs();
  if (!rows) co_return std::move(rows).err();
  std::set<std::string> live;
  for (const auto& r : *rows) live.insert(r.id);

  // Only containers of this daemon's database: another daemon on the same engine keeps its own.
  std::vector<std::string> ours = {std::string(label_instance) + "=" + db_.instance_id()};
  auto containers = co_await engine_.list_containers(ours);
  if (!containers) co_return std::move(containers).err();
  std::map<std::string, docker::container_info> by_sandbox;
  for (auto& c : *containers) {
    auto it = c.labels.find(label_sandbox);
    std::string sandbox_id = it == c.labels.end() ? "" : it->second;
    if (live.count(sandbox_id)) {
      by_sandbox[sandbox_id] = c;
      continue;
    }
    if (auto r = co_await engine_.remove_container(c.id); r || r.err().code == errc::not_found) {
      ++report.containers_removed;
      spdlog::info("reconcile: removed container {} of unknown sandbox '{}'", c.name, sandbox_id);
    }
  }

  for (auto rec : *rows) {
    auto found = by_sandbox.find(rec.id);
    if (rec.state == "creating" || rec.state == "pulling") {
      // The daemon died mid-create: nobody will finish it, so undo it.
      if (found != by_sandbox.end()) {
        rec.container_id = found->second.id;
        (void)co_await destroy_container(rec);
      }
      (void)set_state(rec, "error", "sandfortd restarted while this sandbox was being created");
      ++report.rows_marked_error;
    } else if (found == by_sandbox.end()) {
      if (rec.state == "error") continue;
      (void)set_state(rec, "error", "the sandbox's container vanished");
      ++report.rows_marked_error;
    } else if (!found->second.running && (rec.state == "started" || rec.state == "paused")) {
      (void)set_state(rec, "stopped", "the container was not running when sandfortd started");
      ++report.rows_marked_stopped;
    } else if ((rec.state == "started" || rec.state == "paused") && found->second.paused != (rec.state == "paused")) {
      // Paused or thawed with `docker pause`/`unpause` while sandfortd was down: a paused
      // sandbox stays paused across a restart, and the row says what the container is.
      (void)set_state(rec, found->second.paused ? "paused" : "started", {}, audit::system_actor(),
                      found->second.paused ? "sandbox.pause" : "sandbox.resume");
    } else if ((rec.state == "started" || rec.state == "paused") && rec.address.empty()) {
      // Started by a build without the sandbox network, or the address was never recorded.
      if (auto r = co_await refresh_address(rec); r) (void)db_.update_sandbox(rec);
    }
  }

  reconciled_ = true;
  spdlog::info("reconcile: {} containers removed, {} rows marked error, {} marked stopped",
               report.containers_removed, report.rows_marked_error, report.rows_marked_stopped);
  co_return report;
}

}  // namespace sandfort::sandbox
