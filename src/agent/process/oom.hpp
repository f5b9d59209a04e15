#pragma once
// Telling an OOM kill from any other SIGKILL. The kernel counts the OOM kills of a cgroup;
// the runner reads the count before a command starts and after it ends. Inside a sandbox,
// /sys/fs/cgroup is the container's own cgroup: cgroup v1 keeps the count in
// memory/memory.oom_control, v2 in memory.events, both as a line `oom_kill N`.
//
// The count is the whole cgroup's: a command that died of SIGKILL while another command of
// the same sandbox was OOM-killed is taken for a victim too. Rare, and the cgroup gives no
// per-process record to do better with.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandfort::agent {

// Where the cgroup filesystem is mounted: /sys/fs/cgroup unless main() sets --cgroup-root.
// Set it before serving (it is read by every exec, unsynchronized).
void set_cgroup_root(std::string root);
const std::string& cgroup_root();

// The cgroup's OOM kills so far (the v1 file first, then v2), or nullopt when neither file
// is there or holds the counter (an old kernel, no memory controller).
std::optional<std::uint64_t> oom_kill_count(const std::string& root);

// The N of the `oom_kill N` line in memory.oom_control or memory.events.
std::optional<std::uint64_t> parse_oom_kill(std::string_view text);

}  // namespace sandfort::agent
