// The warm pool: members made one at a time in the background, taken by matching creates.
#include "sandfort/sandbox/warm_pool.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sandfort/sandbox/admission.hpp"

namespace sandfort::sandbox {

namespace asio = boost::asio;
using std::chrono::steady_clock;

namespace {

bool same(const resource_limits& a, const resource_limits& b) {
  return a.cpus == b.cpus && a.memory_mb == b.memory_mb && a.pids == b.pids;
}

}  // namespace

warm_pool::warm_pool(asio::any_io_executor executor, const config& cfg, store::database& db, docker::engine& engine,
                     agent_connector& agent, network_service& net, transitions& lifecycle, admission& room)
    : executor_(std::move(executor)), cfg_(cfg), db_(db), engine_(engine), agent_(agent), net_(net),
      transitions_(lifecycle), admission_(room), wakeup_(std::make_shared<asio::steady_timer>(executor_)) {
  for (const auto& p : cfg.pools)
    if (p.size > 0 && p.resources) pools_.push_back(std::make_shared<pool>(pool{p}));
}

void warm_pool::start(bool hard_disk) {
  if (started_ || pools_.empty()) return;
  started_ = true;
  hard_disk_ = hard_disk;
  asio::co_spawn(executor_, fill_forever(), asio::detached);
}

void warm_pool::wake() { wakeup_->cancel(); }

warm_pool::pool* warm_pool::most_wanting() {
  // The emptiest pool first (by the share of its target it holds), among those not backing off.
  pool* best = nullptr;
  auto now = steady_clock::now();
  for (auto& p : pools_) {
    if (static_cast<int>(p->ready.size()) >= p->cfg.size || p->retry_at > now) continue;
    if (!best || p->ready.size() * best->cfg.size < best->ready.size() * p->cfg.size) best = p.get();
  }
  return best;
}

asio::awaitable<void> warm_pool::fill_forever() {
  auto timer = wakeup_;  // the pool may be gone when a wait ends at shutdown
  while (!stopping_) {
    pool* p = most_wanting();
    if (!p) {
      // Nothing to do until a take, a loss or the end of a back-off.
      auto until = steady_clock::time_point::max();
      for (auto& q : pools_)
        if (static_cast<int>(q->ready.size()) < q->cfg.size) until = std::min(until, q->retry_at);
      timer->expires_at(until);
      co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    result<pool_member> made = make_error(errc::internal, "not made");
    if (auto room = admission_.host_room_for_member(p->cfg); !room) {
      made = std::move(room).err();
    } else {
      p->filling = true;
      made = co_await make_member(p->cfg);
    }
    p->filling = false;
    if (!made) {
      // Back off: an image that cannot be pulled or a Docker that refuses must not be hammered.
      p->failures = std::min(p->failures + 1, 6);
      p->retry_at = steady_clock::now() + std::chrono::seconds(1 << p->failures);
      p->last_error = made.err().message;
      spdlog::warn("pool {}: cannot make a member ({}); retrying in {} s", p->cfg.image, p->last_error,
                   1 << p->failures);
      continue;
    }
    p->failures = 0;
    p->last_error.clear();
    if (stopping_) {
      co_await destroy(std::move(*made));
      break;
    }
    p->ready.push_back(std::move(*made));
  }
}

asio::awaitable<void> warm_pool::drain() {
  stopping_ = true;
  wake();
  for (auto& p : pools_) {
    auto members = std::move(p->ready);
    p->ready.clear();
    for (auto& m : members) co_await destroy(std::move(m));
  }
}

std::optional<pool_member> warm_pool::take(const std::string& image, const resource_limits& resources) {
  for (auto& p : pools_) {
    if (p->cfg.image != image || !same(*p->cfg.resources, resources)) continue;
    if (stopping_ || p->ready.empty()) {
      ++p->misses;
      wake();
      return std::nullopt;
    }
    // The oldest first: each member waits about as long as the others.
    pool_member m = std::move(p->ready.front());
    p->ready.erase(p->ready.begin());
    ++p->claims;
    wake();
    return m;
  }
  return std::nullopt;
}

bool warm_pool::lost(const std::string& sandbox_id) {
  for (auto& p : pools_) {
    auto it = std::find_if(p->ready.begin(), p->ready.end(), [&](const auto& m) { return m.sandbox_id == sandbox_id; });
    if (it == p->ready.end()) continue;
    spdlog::warn("pool {}: member {} died; replacing it", p->cfg.image, sandbox_id);
    p->ready.erase(it);
    wake();
    return true;
  }
  return false;
}

std::int64_t warm_pool::waiting_memory_mb() const {
  std::int64_t mb = 0;
  for (const auto& p : pools_) mb += static_cast<std::int64_t>(p->ready.size()) * p->cfg.resources->memory_mb;
  return mb;
}

std::int64_t warm_pool::memory_mb() const {
  std::int64_t mb = waiting_memory_mb();
  for (const auto& p : pools_)
    if (p->filling) mb += p->cfg.resources->memory_mb;
  return mb;
}

void warm_pool::evict(std::int64_t mb) {
  std::vector<pool_member> out;
  for (auto& p : pools_) {
    bool took = false;
    while (mb > 0 && !p->ready.empty()) {
      out.push_back(std::move(p->ready.back()));
      p->ready.pop_back();
      mb -= p->cfg.resources->memory_mb;
      took = true;
    }
    // Not made again at once: the room went to a sandbox, and a refill would only be refused.
    if (took) p->retry_at = std::max(p->retry_at, steady_clock::now() + std::chrono::seconds(2));
  }
  if (out.empty()) return;
  spdlog::info("pool: {} waiting member(s) removed to make room on the host", out.size());
  for (auto& m : out) asio::co_spawn(executor_, destroy(std::move(m)), asio::detached);
  wake();
}

std::vector<pool_status> warm_pool::status() const {
  std::vector<pool_status> out;
  for (const auto& p : pools_)
    out.push_back({p->cfg.image, *p->cfg.resources, p->cfg.size, static_cast<int>(p->ready.size()), p->filling,
                   p->claims, p->misses, p->last_error});
  return out;
}

}  // namespace sandfort::sandbox
