#include "sandfort/sandbox/disk_guard.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "sandfort/docker/messages.hpp"
#include "sandfort/sandbox/disk_usage.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace asio = boost::asio;

// The walker's one thread (walks never run on the I/O thread, nor two at once) and, per started
// sandbox, where its writes land: asked of Docker once per container, forgotten when the sandbox
// is no longer started, so the cost follows the started sandboxes only.
struct disk_guard::watch {
  struct entry {
    std::string container_id;
    std::vector<std::string> roots;  // the writable layer first, then read-write volumes
    std::optional<std::int64_t> last_bytes;
  };
  asio::thread_pool walker{1};
  std::map<std::string, entry> sandboxes;  // by sandbox id
};

namespace {

// One decimal: "64.0 MiB" is never shown for a use just over a limit of 64.
std::string disk_mib_text(std::int64_t bytes) {
  const std::int64_t tenths = (bytes * 10 + (1 << 20) - 1) >> 20;  // rounded up
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " MiB";
}

// Its arguments live in its own frame: the walk shares nothing with the caller while it runs.
asio::awaitable<tree_usage> walk_trees(std::vector<std::string> roots, walk_limits limits) {
  co_return measure_trees(roots, limits);
}

std::string read_proc_mounts() {
  std::ifstream in("/proc/self/mounts");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

bool hard_disk_enforcement_for(const std::string& mode, const docker::storage_info& storage, std::string_view mounts) {
  if (mode == "hard") return true;
  return mode == "auto" && docker::supports_storage_quota(storage, mounts);
}

disk_guard::disk_guard(const config& cfg, store::database& db, docker::engine& engine, const clock& clk,
                       sandbox_stopper& lifecycle)
    : cfg_(cfg), sandboxes_(db), engine_(engine), journal_(db, clk), lifecycle_(lifecycle),
      watch_(std::make_shared<watch>()) {}

task<void> disk_guard::detect_enforcement() {
  const auto& mode = cfg_.disk.enforcement;
  if (mode == "measured") {
    hard_ = false;
    spdlog::info("disk: disk_mb measured every {} s and enforced by stopping (disk.enforcement measured)",
                 cfg_.disk.check_interval_s);
    co_return ok_t{};
  }
  if (mode == "hard") {
    // The operator's word: where the storage cannot, Docker refuses every create, saying why.
    hard_ = true;
    spdlog::info("disk: disk_mb enforced by Docker (StorageOpt size, disk.enforcement hard), and measured every {} s",
                 cfg_.disk.check_interval_s);
    co_return ok_t{};
  }
  auto storage = co_await engine_.storage();
  if (!storage) co_return std::move(storage).err();
  hard_ = hard_disk_enforcement_for(mode, *storage, read_proc_mounts());
  if (hard_)
    spdlog::info("disk: disk_mb enforced by Docker (StorageOpt size; {} on {}), and measured every {} s",
                 storage->driver, storage->backing_filesystem, cfg_.disk.check_interval_s);
  else
    spdlog::info("disk: {} on {} cannot enforce a size (needs overlay2 on XFS with pquota): disk_mb measured every "
                 "{} s and enforced by stopping",
                 storage->driver, storage->backing_filesystem, cfg_.disk.check_interval_s);
  co_return ok_t{};
}

task<disk_guard::measurement> disk_guard::measure(const store::sandbox_record& rec) {
  auto watched = watch_;  // the walker outlives this call, whatever happens to the guard meanwhile
  auto it = watched->sandboxes.find(rec.id);
  if (it == watched->sandboxes.end() || it->second.container_id != rec.container_id) {
    auto info = co_await engine_.inspect_container(rec.container_id);
    if (!info) co_return std::move(info).err();
    if (info->upper_dir.empty() || info->upper_dir.front() != '/')
      co_return make_error(errc::unavailable, "the writable layer of sandbox " + rec.id +
                                                  " cannot be measured (the storage driver is not overlay2)");
    watch::entry e{rec.container_id, {info->upper_dir}, std::nullopt};
    for (const auto& v : info->writable_volume_dirs)
      if (!v.empty() && v.front() == '/') e.roots.push_back(v);
    it = watched->sandboxes.insert_or_assign(rec.id, std::move(e)).first;
  }
  const walk_limits limits{static_cast<std::uint64_t>(cfg_.disk.max_walk_entries), cfg_.disk.max_walk_depth};
  auto usage = co_await asio::co_spawn(watched->walker, walk_trees(it->second.roots, limits), asio::use_awaitable);
  it = watched->sandboxes.find(rec.id);
  if (usage.outcome == walk_outcome::unreadable) {
    if (it != watched->sandboxes.end()) watched->sandboxes.erase(it);  // asked of Docker again next time
    co_return make_error(errc::unavailable, "disk use of sandbox " + rec.id + ": " + usage.detail);
  }
  measurement m;
  m.bytes = static_cast<std::int64_t>(usage.bytes);
  m.layer_bytes = static_cast<std::int64_t>(usage.bytes_per_root.front());
  m.volume_bytes = m.bytes - m.layer_bytes;
  if (usage.outcome == walk_outcome::too_many_entries)
    m.over_bounds = "more than " + std::to_string(cfg_.disk.max_walk_entries) +
                    " files and directories (disk.max_walk_entries): its disk use cannot be measured";
  else if (usage.outcome == walk_outcome::too_deep)
    m.over_bounds = "directories nested deeper than " + std::to_string(cfg_.disk.max_walk_depth) +
                    " (disk.max_walk_depth): its disk use cannot be measured";
  if (it != watched->sandboxes.end()) it->second.last_bytes = m.bytes;
  co_return m;
}

std::optional<std::int64_t> disk_guard::last_bytes(const std::string& sandbox_id) const {
  auto it = watch_->sandboxes.find(sandbox_id);
  if (it == watch_->sandboxes.end()) return std::nullopt;
  return it->second.last_bytes;
}

asio::awaitable<int> disk_guard::check() {
  auto rows = sandboxes_.list_live_sandboxes_all_orgs();
  if (!rows) co_return 0;
  std::set<std::string> started;
  int stopped = 0;
  for (const auto& rec : *rows) {
    if (rec.state != "started" || rec.container_id.empty()) continue;
    started.insert(rec.id);
    auto m = co_await measure(rec);
    if (!m) {
      spdlog::debug("{}", m.err().message);
      continue;
    }
    const auto limit_mb = disk_limit_mb(spec_from_json(rec.spec_json).limits, cfg_.disk);
    if (m->over_bounds.empty() && m->bytes <= limit_mb * 1024 * 1024) continue;
    // Measured off the I/O thread: it may have been stopped or deleted meanwhile.
    auto cur = sandboxes_.get_sandbox(rec.org_id, rec.id);
    if (!cur || cur->state != "started") continue;
    const std::string why =
        m->over_bounds.empty()
            ? "disk use " + disk_mib_text(m->bytes) + " is over its disk_mb " + std::to_string(limit_mb) +
                  " (writable layer " + disk_mib_text(m->layer_bytes) + ", read-write volumes " +
                  disk_mib_text(m->volume_bytes) + ")"
            : m->over_bounds;
    nlohmann::json details{{"quota", "disk_mb"},        {"limit", limit_mb},
                           {"disk_bytes", m->bytes},    {"layer_bytes", m->layer_bytes},
                           {"volume_bytes", m->volume_bytes}};
    if (!m->over_bounds.empty()) details["unmeasurable"] = m->over_bounds;
    // Recorded first; the stop is a sandbox.stop by system with the same words.
    (void)journal_.record_event(rec.org_id, audit::system_actor(),
                                {"guardrail.disk_exceeded", rec.id, "denied", std::move(details)});
    auto r = co_await lifecycle_.halt(*cur, "stopped: " + why + "; delete files (or the sandbox) to get under it",
                           audit::system_actor(), std::nullopt, stop_reason::disk_quota);
    if (r) {
      spdlog::warn("sandbox {} stopped: {}", rec.id, why);
      ++stopped;
    } else {
      spdlog::warn("sandbox {} is over its disk_mb but did not stop: {}", rec.id, r.err().message);
    }
  }
  std::erase_if(watch_->sandboxes, [&](const auto& kv) { return !started.contains(kv.first); });
  co_return stopped;
}

}  // namespace sandfort::sandbox
