#pragma once
// The process's own gauges, read from /proc/self when Prometheus scrapes: open descriptors
// (against the limit sandfortd raised at start), resident memory and uptime.

#include <cstdint>
#include <optional>
#include <string>

#include "sandfort/metrics/registry.hpp"

namespace sandfort::metrics {

struct process_stats {
  std::optional<std::uint64_t> open_fds;
  std::optional<std::uint64_t> max_fds;           // RLIMIT_NOFILE's soft limit
  std::optional<std::uint64_t> resident_bytes;    // VmRSS
  std::optional<double> uptime_seconds;           // since the process started
};

// From the files under `proc_self` ("/proc/self") and `proc_uptime` ("/proc/uptime"); what
// cannot be read stays empty (and its gauge keeps its last value).
process_stats read_process_stats(const std::string& proc_self = "/proc/self",
                                 const std::string& proc_uptime = "/proc/uptime");

// Sets sandfort_process_open_fds, _max_fds, _resident_memory_bytes, _uptime_seconds in `r`.
void update_process_metrics(registry& r, const process_stats& s);

}  // namespace sandfort::metrics
