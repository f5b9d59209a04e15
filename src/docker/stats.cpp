// Resource use of a container, computed the way the docker CLI does.
#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"

#include <algorithm>
#include <cstdint>

namespace sandfort::docker {

namespace {

using json = nlohmann::json;

std::int64_t int_at(const json& j, std::initializer_list<const char*> path) {
  const json* node = &j;
  for (const char* key : path) {
    if (!node->is_object() || !node->contains(key)) return 0;
    node = &(*node)[key];
  }
  // Docker's counters are unsigned integers: anything else (a float, a number past 2^64 that
  // JSON reads as one, a negative) reads as 0, so the differences below cannot overflow.
  if (node->is_number_unsigned())
    return static_cast<std::int64_t>(std::min<std::uint64_t>(node->get<std::uint64_t>(), INT64_MAX));
  return 0;
}

}  // namespace

container_stats parse_stats(const json& body) {
  container_stats out;
  auto cpu = int_at(body, {"cpu_stats", "cpu_usage", "total_usage"}) -
             int_at(body, {"precpu_stats", "cpu_usage", "total_usage"});
  auto system = int_at(body, {"cpu_stats", "system_cpu_usage"}) - int_at(body, {"precpu_stats", "system_cpu_usage"});
  auto cpus = int_at(body, {"cpu_stats", "online_cpus"});
  if (cpus == 0 && body.contains("cpu_stats") && body["cpu_stats"].contains("cpu_usage") &&
      body["cpu_stats"]["cpu_usage"].contains("percpu_usage") && body["cpu_stats"]["cpu_usage"]["percpu_usage"].is_array())
    cpus = static_cast<std::int64_t>(body["cpu_stats"]["cpu_usage"]["percpu_usage"].size());
  if (cpu > 0 && system > 0) out.cpu_percent = static_cast<double>(cpu) / static_cast<double>(system) * static_cast<double>(cpus) * 100.0;
  // Page cache the kernel can drop is not the sandbox's memory: cgroup v1 names it
  // total_inactive_file, v2 inactive_file.
  auto usage = int_at(body, {"memory_stats", "usage"});
  auto inactive = int_at(body, {"memory_stats", "stats", "total_inactive_file"});
  if (inactive == 0) inactive = int_at(body, {"memory_stats", "stats", "inactive_file"});
  out.memory_bytes = inactive < usage ? usage - inactive : usage;
  out.memory_limit_bytes = int_at(body, {"memory_stats", "limit"});
  out.pids = int_at(body, {"pids_stats", "current"});
  return out;
}

}  // namespace sandfort::docker
