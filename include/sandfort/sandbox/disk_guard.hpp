#pragma once
// disk_mb (src/sandbox/disk_guard.cpp, docs/limits.md "Disk"): hard where the engine's storage
// enforces a container's size, and everywhere a loop that measures each started sandbox's
// writable layer and read-write volumes on the host and stops the sandbox that holds more than
// its disk_mb. It stops sandboxes through the lifecycle (sandbox_stopper), and knows nothing else
// of it.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sandfort/audit/journal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/sandbox_stopper.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

class disk_guard {
 public:
  disk_guard(const config& cfg, store::database& db, docker::engine& engine, const clock& clk,
             sandbox_stopper& lifecycle);
  disk_guard(const disk_guard&) = delete;
  disk_guard& operator=(const disk_guard&) = delete;

  // Asks the engine whether its storage enforces a container's size (disk.enforcement auto), once
  // before the first create; hard enforcement then puts disk_mb into every new container.
  task<void> detect_enforcement();
  bool hard_enforcement() const { return hard_; }
  // Measures every started sandbox's writable layer and read-write volumes and stops the ones
  // over their disk_mb; the daemon runs it every disk.check_interval_s. Returns how many it stopped.
  boost::asio::awaitable<int> check();

  // A started sandbox's disk use: its writable layer and read-write volumes, walked off the I/O thread.
  struct measurement {
    std::int64_t bytes = 0;
    std::int64_t layer_bytes = 0;
    std::int64_t volume_bytes = 0;
    std::string over_bounds;  // not measurable within disk.max_walk_*: why (counts as over the limit)
  };
  task<measurement> measure(const store::sandbox_record& rec);
  // What check() measured last for the sandbox, if it measured it since it started.
  std::optional<std::int64_t> last_bytes(const std::string& sandbox_id) const;

 private:
  struct watch;  // disk_guard.cpp

  const config& cfg_;
  store::sandbox_store sandboxes_;
  docker::engine& engine_;
  audit::journal journal_;
  sandbox_stopper& lifecycle_;
  bool hard_ = false;
  // Shared with the walks in flight: the walker outlives a call, whatever happens to the guard meanwhile.
  std::shared_ptr<watch> watch_;
};

// Whether new containers get Docker's StorageOpt size: disk.enforcement `hard`, or `auto` where
// the engine's storage supports it (docker::supports_storage_quota; `mounts`: /proc/self/mounts).
bool hard_disk_enforcement_for(const std::string& mode, const docker::storage_info& storage, std::string_view mounts);

}  // namespace sandfort::sandbox
