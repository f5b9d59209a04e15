#pragma once
// The host's memory as sandbox admission sees it (docs/limits.md, "Host memory"): what the host
// has (the seam: /proc/meminfo in sandfortd, a fake in tests) and what of it sandboxes may hold
// together. Admission itself is admission.hpp's (src/sandbox/host_admission.cpp).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sandfort/core/config.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::sandbox {

class host_memory {
 public:
  virtual ~host_memory() = default;
  // The host's memory (MemTotal) in MiB.
  virtual result<std::int64_t> total_mb() = 0;
};

// MemTotal of /proc/meminfo, read once: it does not change while the host runs.
class proc_meminfo final : public host_memory {
 public:
  explicit proc_meminfo(std::string path = "/proc/meminfo") : path_(std::move(path)) {}
  result<std::int64_t> total_mb() override;

 private:
  std::string path_;
  std::optional<std::int64_t> total_mb_;
};

// MemTotal of a /proc/meminfo text, in MiB (rounded down).
result<std::int64_t> parse_mem_total_mb(std::string_view meminfo);

// What sandboxes may hold together: (total − reserve) × over-commit, never below 0.
std::int64_t sandbox_memory_capacity_mb(std::int64_t total_mb, const host_config& host);

}  // namespace sandfort::sandbox
