// Start-up reconciliation: Docker and the database must tell the same story before we serve.
#include <chrono>
#include <cstdint>
#include <set>
#include <spdlog/spdlog.h>

#include "sandfort/core/ids.hpp"
#include "sandfort/sandbox/reconciler.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace {

std::string label_of(const std::map<std::string, std::string>& labels, const char* key) {
  auto it = labels.find(key);
  return it == labels.end() ? std::string() : it->second;
}

template <typename Record>
std::set<std::string> ids_of(const std::vector<Record>& rows) {
  std::set<std::string> out;
  for (const auto& r : rows) out.insert(r.id);
  return out;
}

// Volumes and snapshot images: made in Docker first, then their row (volumes.cpp,
// snapshots.cpp). A crash in between, or a failed insert whose undo failed too, leaves a Docker
// object no row names: its disk would be lost for ever. The other way round, a row whose object
// was removed behind our back names nothing.
//
// Orphans are removed only when Docker says they were made before this pass began (`started`,
// unix seconds): the API serves volume and snapshot creates before reconciliation has finished,
// and a create in flight has its Docker object before its row. An object made during the pass is
// left for the next start. Rows are read again after Docker's lists, so a create whose row was
// written meanwhile is seen. Images are removed by id and never forced: one that a container
// still uses (or that someone tagged elsewhere) is left, and said so.
//
// A live row whose object is gone is logged and counted, not changed: volumes and snapshots have
// no error state (the schema allows ready, deleting and deleted), and marking one deleted would
// free its name and hide the loss. Its owner sees it when a create that uses it fails, and
// DELETE still works (an object that is not there counts as removed).
task<void> reconcile_storage(store::database& db, docker::engine& engine, std::int64_t started,
                             reconcile_report& report) {
  const std::string instance = std::string(label_instance) + "=" + db.instance_id();
  store::resource_store resources(db);

  // --- volumes ---
  auto volume_rows = resources.list_live_volumes_all_orgs();
  if (!volume_rows) co_return std::move(volume_rows).err();
  const std::vector<std::string> our_volumes = {instance, label_volume};
  auto volumes = co_await engine.list_volumes(our_volumes);
  if (!volumes) co_return std::move(volumes).err();
  auto volume_rows_now = resources.list_live_volumes_all_orgs();
  if (!volume_rows_now) co_return std::move(volume_rows_now).err();
  const auto volume_ids = ids_of(*volume_rows_now);
  std::set<std::string> present_volume_ids, present_volume_names;
  for (const auto& v : *volumes) {
    const std::string id = label_of(v.labels, label_volume);
    present_volume_ids.insert(id);
    present_volume_names.insert(v.name);
    if (volume_ids.count(id)) continue;
    if (v.created_unix >= started) {
      spdlog::info("reconcile: Docker volume {} of unknown volume '{}' was made during reconciliation: left", v.name, id);
      continue;
    }
    auto removed = co_await engine.remove_volume(v.name);
    if (removed || removed.err().code == errc::not_found) {
      ++report.volumes_removed;
      spdlog::info("reconcile: removed Docker volume {} of unknown volume '{}'", v.name, id);
    } else {
      ++report.orphans_kept;
      spdlog::warn("reconcile: Docker volume {} of unknown volume '{}' is left: {}", v.name, id,
                   removed.err().code == errc::conflict ? "a container still uses it" : removed.err().message);
    }
  }
  for (const auto& r : *volume_rows) {
    if (present_volume_ids.count(r.id) || present_volume_names.count(r.docker_name)) continue;
    ++report.volume_rows_missing;
    spdlog::warn("reconcile: volume {} ({}, org {}, {}) has no Docker volume {}: its data is gone", r.id, r.name,
                 r.org_id, r.state, r.docker_name);
  }

  // --- snapshot images ---
  auto snapshot_rows = resources.list_live_snapshots_all_orgs();
  if (!snapshot_rows) co_return std::move(snapshot_rows).err();
  const std::vector<std::string> our_images = {instance, label_snapshot};
  auto images = co_await engine.list_images(our_images);
  if (!images) co_return std::move(images).err();
  auto snapshot_rows_now = resources.list_live_snapshots_all_orgs();
  if (!snapshot_rows_now) co_return std::move(snapshot_rows_now).err();
  const auto snapshot_ids = ids_of(*snapshot_rows_now);
  std::set<std::string> present_snapshot_ids, present_refs;
  for (const auto& img : *images) {
    const std::string id = label_of(img.labels, label_snapshot);
    present_snapshot_ids.insert(id);
    present_refs.insert(img.repo_tags.begin(), img.repo_tags.end());
    if (snapshot_ids.count(id)) continue;
    const std::string shown = img.repo_tags.empty() ? img.id : img.repo_tags.front();
    if (img.created_unix >= started) {
      spdlog::info("reconcile: image {} of unknown snapshot '{}' was made during reconciliation: left", shown, id);
      continue;
    }
    auto removed = co_await engine.remove_image(img.id);
    if (removed || removed.err().code == errc::not_found) {
      ++report.images_removed;
      spdlog::info("reconcile: removed image {} ({}) of unknown snapshot '{}'", shown, img.id, id);
    } else {
      ++report.orphans_kept;
      spdlog::warn("reconcile: image {} ({}) of unknown snapshot '{}' is left: {}", shown, img.id, id,
                   removed.err().code == errc::conflict
                       ? "a container still uses it, or it is tagged elsewhere (it is never forced)"
                       : removed.err().message);
    }
  }
  for (const auto& r : *snapshot_rows) {
    if (present_snapshot_ids.count(r.id) || present_refs.count(r.image_ref)) continue;
    ++report.snapshot_rows_missing;
    spdlog::warn("reconcile: snapshot {} ({}, org {}, {}) has no image {}: it cannot be used", r.id, r.name, r.org_id,
                 r.state, r.image_ref);
  }
  co_return ok_t{};
}

}  // namespace

reconciler::reconciler(boost::asio::any_io_executor executor, const config& cfg, store::database& db,
                       docker::engine& engine, const clock& clk, network_service& net, activity_tracker& activity,
                       warm_pool& pool, transitions& lifecycle)
    : executor_(std::move(executor)),
      cfg_(cfg),
      db_(db),
      sandboxes_(db),
      engine_(engine),
      clock_(clk),
      net_(net),
      activity_(activity),
      pool_(pool),
      transitions_(lifecycle) {}

task<reconcile_report> reconciler::reconcile() {
  reconcile_report report;
  const std::int64_t started =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.now().time_since_epoch()).count();
  auto rows = sandboxes_.list_live_sandboxes_all_orgs();
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
    // Every container sandfortd makes names its sandbox. One without (someone's `docker run` of a
    // snapshot image: labels are inherited from images) is not ours to remove.
    if (sandbox_id.empty()) continue;
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
        (void)co_await transitions_.destroy_container(rec);
      }
      (void)transitions_.set_state(rec, "error", "sandfortd restarted while this sandbox was being created");
      ++report.rows_marked_error;
    } else if (found == by_sandbox.end()) {
      if (rec.state == "error") continue;
      (void)transitions_.set_state(rec, "error", "the sandbox's container vanished");
      ++report.rows_marked_error;
    } else if (!found->second.running && (rec.state == "started" || rec.state == "paused")) {
      (void)transitions_.set_state(rec, "stopped", "the container was not running when sandfortd started",
                                   audit::system_actor(), {}, std::nullopt, stop_reason::daemon_restart);
      ++report.rows_marked_stopped;
    } else if ((rec.state == "started" || rec.state == "paused") && found->second.paused != (rec.state == "paused")) {
      // Paused or thawed with `docker pause`/`unpause` while sandfortd was down: a paused
      // sandbox stays paused across a restart, and the row says what the container is.
      (void)transitions_.set_state(rec, found->second.paused ? "paused" : "started", {}, audit::system_actor(),
                                   found->second.paused ? "sandbox.pause" : "sandbox.resume");
    } else if ((rec.state == "started" || rec.state == "paused") && rec.address.empty()) {
      // Started by a build without the sandbox network, or the address was never recorded.
      if (auto r = co_await net_.refresh_address(rec); r) (void)sandboxes_.update_sandbox(rec);
    }
    // A running sandbox that dials home finds its door open again (its agent dials again).
    if (found != by_sandbox.end() && found->second.running && (rec.state == "started" || rec.state == "paused"))
      if (auto r = transitions_.prepare_agent(rec); !r)
        spdlog::warn("reconcile: sandbox {}: {}", rec.id, r.err().message);
  }

  // After the containers: those just removed no longer hold the volumes and images they used.
  if (auto storage = co_await reconcile_storage(db_, engine_, started, report); !storage)
    co_return std::move(storage).err();

  reconciled_ = true;
  spdlog::info(
      "reconcile: {} containers removed, {} rows marked error, {} marked stopped; {} volumes and {} images without a "
      "row removed, {} left; {} volume and {} snapshot rows without their Docker object",
      report.containers_removed, report.rows_marked_error, report.rows_marked_stopped, report.volumes_removed,
      report.images_removed, report.orphans_kept, report.volume_rows_missing, report.snapshot_rows_missing);
  co_return report;
}

}  // namespace sandfort::sandbox
