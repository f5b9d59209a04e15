// Host memory admission (docs/limits.md, "Host memory"). Organization quotas bound one tenant;
// they may add up to more than the host has, and the host's OOM killer would then choose among
// every tenant's processes and sandfortd. So a sandbox is admitted only when its memory limit
// fits beside those of every sandbox that holds memory — of any organization — and of the warm
// pool's members, within what the host can give.
#include "sandfort/sandbox/host_memory.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <spdlog/spdlog.h>
#include <sstream>

#include "sandfort/sandbox/admission.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace {

// Running, paused (memory kept) or being made.
bool holds_host_memory(const std::string& state) {
  return state == "creating" || state == "pulling" || state == "started" || state == "paused";
}

}  // namespace

result<std::int64_t> parse_mem_total_mb(std::string_view meminfo) {
  constexpr std::string_view field = "MemTotal:";
  for (std::size_t start = 0; start < meminfo.size();) {
    auto end = meminfo.find('\n', start);
    std::string_view line = meminfo.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    start = end == std::string_view::npos ? meminfo.size() : end + 1;
    if (!line.starts_with(field)) continue;
    line.remove_prefix(field.size());
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    std::int64_t kib = 0;
    auto [rest, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (ec != std::errc{} || kib <= 0 || std::string_view(rest, line.data() + line.size() - rest) != " kB")
      return make_error(errc::internal, "MemTotal in /proc/meminfo is not '<number> kB'");
    return kib / 1024;
  }
  return make_error(errc::internal, "/proc/meminfo has no MemTotal");
}

result<std::int64_t> proc_meminfo::total_mb() {
  if (total_mb_) return *total_mb_;
  std::ifstream in(path_);
  if (!in) return make_error(errc::internal, "cannot read " + path_);
  std::stringstream text;
  text << in.rdbuf();
  auto total = parse_mem_total_mb(text.str());
  if (total) total_mb_ = *total;
  return total;
}

std::int64_t sandbox_memory_capacity_mb(std::int64_t total_mb, const host_config& host) {
  const auto left = std::max<std::int64_t>(0, total_mb - host.memory_reserve_mb);
  return static_cast<std::int64_t>(std::floor(static_cast<double>(left) * host.memory_overcommit));
}

result<std::int64_t> admission::sandbox_memory_held_mb() {
  auto rows = sandboxes_.list_live_sandboxes_all_orgs();
  if (!rows) return std::move(rows).err();
  std::int64_t held = 0;
  for (const auto& rec : *rows)
    if (holds_host_memory(rec.state) || starting_->contains(rec.id))
      held += spec_from_json(rec.spec_json).limits.memory_mb;
  return held;
}

result<void> admission::admit_to_host(const std::string& org_id, std::int64_t memory_mb, const std::string& restarting,
                                    const audit::actor& who, bool may_evict) {
  auto total = host_.total_mb();
  // Not knowing what the host has, nothing is admitted on a guess.
  if (!total) return make_error(errc::unavailable, "cannot tell the host's memory: " + total.err().message);
  const std::int64_t capacity = sandbox_memory_capacity_mb(*total, cfg_.host);
  auto held = sandbox_memory_held_mb();
  if (!held) return std::move(held).err();
  const std::int64_t pool = pool_.memory_mb();
  if (*held + pool + memory_mb <= capacity) return {};
  // Members waiting in the pool are spare: a sandbox someone asked for goes first.
  const std::int64_t short_by = *held + pool + memory_mb - capacity;
  if (may_evict && pool_.waiting_memory_mb() >= short_by) {
    pool_.evict(short_by);
    return {};
  }
  // The operator's log has the host's figures; the tenant's answer does not describe the others' use.
  spdlog::warn("host full: organization {} asked for {} MiB; sandboxes hold {} MiB and the pool {} MiB of {} MiB "
               "((MemTotal {} − reserve {}) × over-commit {})",
               org_id, memory_mb, *held, pool, capacity, *total, cfg_.host.memory_reserve_mb,
               cfg_.host.memory_overcommit);
  nlohmann::json details = {{"memory_mb", memory_mb}, {"capacity_mb", capacity}};
  if (!restarting.empty()) details["sandbox"] = restarting;
  // The refusal is recorded; if even that fails, the call is still refused.
  (void)journal_.record_event(org_id, who, {"guardrail.host_full", restarting, "denied", std::move(details)});
  return make_error(errc::host_full, "host full: this host cannot hold " + std::to_string(memory_mb) +
                                         " MiB more of sandbox memory now (it gives sandboxes " +
                                         std::to_string(capacity) +
                                         " MiB in all); retry after sandboxes are stopped or deleted, or ask for less");
}

result<void> admission::host_room_for_member(const pool_config& pool) {
  auto total = host_.total_mb();
  if (!total) return std::move(total).err();
  const std::int64_t capacity = sandbox_memory_capacity_mb(*total, cfg_.host);
  auto held = sandbox_memory_held_mb();
  if (!held) return std::move(held).err();
  if (*held + pool_.memory_mb() + pool.resources->memory_mb <= capacity) return {};
  return make_error(errc::host_full, "host full: no room for another member of " +
                                         std::to_string(pool.resources->memory_mb) + " MiB (sandboxes " +
                                         std::to_string(*held) + " MiB, pool " + std::to_string(pool_.memory_mb()) +
                                         " MiB, of " + std::to_string(capacity) + " MiB)");
}

}  // namespace sandfort::sandbox
