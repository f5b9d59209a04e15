// The warm pool: members made in the background, a few at once, taken by matching creates; and
// the sizing policy that decides how many (pool_sizing.hpp).
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

// Enough to count any burst a pool could learn from (64 at most) many times over, and bounded
// whatever the request rate.
constexpr std::size_t max_recent_creates = 4096;

std::string creates(int n) { return std::to_string(n) + (n == 1 ? " matching create" : " matching creates"); }

}  // namespace

// --- The sizing policy (pool_sizing.hpp) ---

pool_sizing::pool_sizing(int min_size, int max_size, std::chrono::seconds window, std::chrono::seconds idle_shrink)
    : min_(min_size), max_(std::max(min_size, max_size)), window_(window), idle_(idle_shrink) {}

void pool_sizing::matched(time_point now) {
  if (idle(now)) peak_.reset();  // a busy spell begins: what came before it is forgotten
  while (!recent_.empty() && now - recent_.front() >= window_) recent_.pop_front();
  recent_.push_back(now);
  if (recent_.size() > max_recent_creates) recent_.pop_front();
  last_ = now;
  const int n = static_cast<int>(recent_.size());
  if (!peak_ || n >= peak_->creates) peak_ = burst{n, now};
}

int pool_sizing::target(time_point now) const {
  if (!peak_ || idle(now)) return min_;
  return std::clamp(peak_->creates, min_, max_);
}

std::optional<pool_sizing::time_point> pool_sizing::shrinks_at(time_point now) const {
  if (target(now) == min_) return std::nullopt;
  return *last_ + idle_;
}

std::string pool_sizing::reason(time_point now) const {
  const std::string min_text = "min_size " + std::to_string(min_);
  if (min_ == max_) return "fixed: min_size = max_size = " + std::to_string(min_);
  if (!peak_) return min_text + ": no matching create yet";
  const std::string window_text = " within " + std::to_string(window_.count()) + " s";
  if (idle(now))
    return min_text + ": idle, no matching create for " + std::to_string(idle_.count()) + " s";
  const std::string burst_text = "a burst of " + creates(peak_->creates) + window_text;
  if (peak_->creates <= min_)
    return min_text + ": the largest burst since idle (" + creates(peak_->creates) + window_text + ") is not above it";
  const std::string until = "; back to " + min_text + " after " + std::to_string(idle_.count()) + " s without one";
  if (peak_->creates > max_) return "max_size " + std::to_string(max_) + ": " + burst_text + ", capped" + until;
  return burst_text + until;
}

// --- The pool ---

warm_pool::warm_pool(asio::any_io_executor executor, const config& cfg, store::database& db, docker::engine& engine,
                     agent_connector& agent, network_service& net, transitions& lifecycle, admission& room)
    : executor_(std::move(executor)), cfg_(cfg), db_(db), engine_(engine), agent_(agent), net_(net),
      transitions_(lifecycle), admission_(room), wakeup_(std::make_shared<asio::steady_timer>(executor_)) {
  const std::chrono::seconds window(cfg.pool.burst_window_s), idle(cfg.pool.idle_shrink_s);
  for (const auto& p : cfg.pools)
    if (std::max(p.min_size, p.max_size) > 0 && p.resources)
      pools_.push_back(std::make_shared<pool>(p, pool_sizing(p.min_size, p.max_size, window, idle)));
}

void warm_pool::start(bool hard_disk) {
  if (started_ || pools_.empty()) return;
  started_ = true;
  hard_disk_ = hard_disk;
  asio::co_spawn(executor_, fill_forever(), asio::detached);
}

void warm_pool::wake() { wakeup_->cancel(); }

warm_pool::pool* warm_pool::most_wanting(steady_clock::time_point now) {
  // The emptiest pool first (by the share of its target it holds or is making), among those not
  // backing off.
  pool* best = nullptr;
  int best_has = 0, best_target = 1;
  for (auto& p : pools_) {
    const int has = static_cast<int>(p->ready.size()) + p->making, target = p->sizing.target(now);
    if (has >= target || p->retry_at > now) continue;
    if (!best || has * best_target < best_has * target) {
      best = p.get();
      best_has = has;
      best_target = target;
    }
  }
  return best;
}

void warm_pool::back_off(pool& p, const std::string& why) {
  // An image that cannot be pulled, a Docker that refuses or a full host must not be hammered.
  p.failures = std::min(p.failures + 1, 6);
  p.retry_at = steady_clock::now() + std::chrono::seconds(1 << p.failures);
  p.last_error = why;
  spdlog::warn("pool {}: cannot make a member ({}); retrying in {} s", p.cfg.image, why, 1 << p.failures);
}

void warm_pool::trim(steady_clock::time_point now) {
  for (auto& p : pools_) {
    const int target = p->sizing.target(now);
    if (static_cast<int>(p->ready.size()) <= target) continue;
    spdlog::info("pool {}: idle; {} waiting member(s) beyond its target of {} removed", p->cfg.image,
                 p->ready.size() - static_cast<std::size_t>(target), target);
    while (static_cast<int>(p->ready.size()) > target) {
      asio::co_spawn(executor_, destroy(std::move(p->ready.back())), asio::detached);
      p->ready.pop_back();
    }
  }
}

asio::awaitable<void> warm_pool::fill_forever() {
  auto timer = wakeup_;  // the pool may be gone when a wait ends at shutdown
  while (!stopping_) {
    const auto now = steady_clock::now();
    trim(now);
    while (making_ < cfg_.pool.max_parallel) {
      pool* p = most_wanting(now);
      if (!p) break;
      if (auto room = admission_.host_room_for_member(p->cfg); !room) {
        back_off(*p, room.err().message);
        continue;
      }
      // Counted before anything is awaited: the next room check, and every create's, sees it.
      ++p->making;
      ++making_;
      auto shared = *std::find_if(pools_.begin(), pools_.end(), [&](const auto& q) { return q.get() == p; });
      asio::co_spawn(executor_, make_one(std::move(shared)), asio::detached);
    }
    // Until a take, a loss, a member made, the end of a back-off or a pool going idle.
    auto until = steady_clock::time_point::max();
    for (auto& q : pools_) {
      if (static_cast<int>(q->ready.size()) + q->making < q->sizing.target(now) && q->retry_at > now)
        until = std::min(until, q->retry_at);
      if (auto shrink = q->sizing.shrinks_at(now)) until = std::min(until, *shrink);
    }
    timer->expires_at(until);
    co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<void> warm_pool::make_one(std::shared_ptr<pool> p) {
  auto made = co_await make_member(p->cfg);
  if (made && stopping_) co_await destroy(std::move(*made));  // drain() waits for this
  --p->making;
  --making_;
  if (!made) {
    back_off(*p, made.err().message);
  } else if (!stopping_) {
    p->failures = 0;
    p->last_error.clear();
    p->ready.push_back(std::move(*made));
  }
  wake();
}

asio::awaitable<void> warm_pool::drain() {
  stopping_ = true;
  wake();
  for (auto& p : pools_) {
    auto members = std::move(p->ready);
    p->ready.clear();
    for (auto& m : members) co_await destroy(std::move(m));
  }
  // Members being made remove themselves when made (make_one). Waited for a while; what a slow
  // Docker still makes after it is removed by start-up reconciliation next time.
  asio::steady_timer pause(executor_);
  for (int i = 0; making_ > 0 && i < 500; ++i) {
    pause.expires_after(std::chrono::milliseconds(20));
    co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

std::optional<pool_member> warm_pool::take(const std::string& image, const resource_limits& resources) {
  for (auto& p : pools_) {
    if (p->cfg.image != image || !same(*p->cfg.resources, resources)) continue;
    p->sizing.matched(steady_clock::now());
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
  for (const auto& p : pools_) mb += p->making * p->cfg.resources->memory_mb;
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
  const auto now = steady_clock::now();
  for (const auto& p : pools_) {
    pool_status s;
    s.image = p->cfg.image;
    s.resources = *p->cfg.resources;
    s.disk_mb = cfg_.disk.default_mb;
    s.min_size = p->sizing.min_size();
    s.max_size = p->sizing.max_size();
    s.target = p->sizing.target(now);
    s.reason = p->sizing.reason(now);
    s.last_burst = p->sizing.last_burst();
    if (s.last_burst) s.last_burst_age_s = std::chrono::duration<double>(now - s.last_burst->at).count();
    s.ready = static_cast<int>(p->ready.size());
    s.making = p->making;
    s.claims = p->claims;
    s.misses = p->misses;
    s.last_error = p->last_error;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace sandfort::sandbox
