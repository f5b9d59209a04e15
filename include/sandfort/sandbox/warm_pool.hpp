#pragma once
// The warm pool (docs/pool.md): for each configured (image, resource class), sandboxes that are
// already created, started and answering, so that a create asking for exactly that takes one in
// milliseconds instead of waiting on Docker and the agent's start.
//
// The pool makes and removes its members itself (src/sandbox/pool_members.cpp: through the image
// door, the spec builder and the sandbox's transitions, as a create does), when host memory
// admission (admission.hpp) says there is room; the service applies what is per request when it
// claims one (the row, the environment and proxy credential, the working directory). Members belong
// to no organization — they have no row, count against no organization's quota and are never listed
// — and each is handed out once: a claimed member is the claimant's sandbox from then on and never
// returns to the pool. Their memory is the host's all the same: host admission counts them
// (docs/limits.md, "Host memory").
//
// Each pool's target follows the demand (pool_sizing.hpp): it grows to the size of the latest burst
// of matching creates, up to its max_size, and falls back to min_size when the pool is idle. Members
// are made in parallel, at most pool.max_parallel at once across all pools (each a Docker
// create/start and an agent start-up, taken from the traffic being served), and only while host
// admission has room for each.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/core/config.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/network.hpp"
#include "sandfort/sandbox/pool_sizing.hpp"
#include "sandfort/sandbox/transitions.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::sandbox {

class admission;

// A started sandbox waiting in the pool. Its sandbox id is the claimant's sandbox's id: the
// container's labels (which Docker cannot change) already name it, and it is random.
struct pool_member {
  std::string sandbox_id;
  std::string container_id;
  std::string address;  // on the sandbox network
};

struct pool_status {
  std::string image;
  resource_limits resources;
  std::int64_t disk_mb = 0;  // every member's: disk.default_mb
  int min_size = 0;
  int max_size = 0;
  int target = 0;         // what it fills to now (pool_sizing)
  std::string reason;     // why the target is what it is
  std::optional<pool_sizing::burst> last_burst;
  double last_burst_age_s = 0;  // of last_burst
  int ready = 0;          // members waiting to be claimed
  int making = 0;         // members of this pool being made now
  std::uint64_t claims = 0;   // creates served from this pool
  std::uint64_t misses = 0;   // matching creates that found it empty (and were made cold)
  std::string last_error;     // why the last member could not be made, if it could not
};

class warm_pool {
 public:
  // The pools are cfg.pools. `room`: whether the host has room for one more member now
  // (docs/limits.md, "Host memory"); a refusal backs the pool off like a failed make.
  warm_pool(boost::asio::any_io_executor executor, const config& cfg, store::database& db, docker::engine& engine,
            agent_connector& agent, network_service& net, transitions& lifecycle, admission& room);
  warm_pool(const warm_pool&) = delete;
  warm_pool& operator=(const warm_pool&) = delete;

  // Starts making members (after start-up reconciliation: it removes any left by a previous run).
  // `hard_disk`: the engine's storage enforces disk_mb (detected before; spec.hpp's container_site).
  void start(bool hard_disk);
  // Removes a member's container (it was never claimed, or its claim was refused).
  boost::asio::awaitable<void> destroy(pool_member member);
  // Stops making members and removes the waiting ones (shutdown). Idempotent.
  boost::asio::awaitable<void> drain();

  // A waiting member of the pool for exactly this image and these resources, taken out of the
  // pool (refilling starts); nullopt when no pool matches or it is empty. Either way a matching
  // create is demand the pool's target learns from.
  std::optional<pool_member> take(const std::string& image, const resource_limits& resources);
  // A member's container died or vanished: forgotten (and replaced). False if it is no member.
  bool lost(const std::string& sandbox_id);

  std::vector<pool_status> status() const;

  // Memory limits of the members waiting and of those being made, in MiB: the host holds them.
  std::int64_t memory_mb() const;
  // Of the waiting members only: what evict() can give back.
  std::int64_t waiting_memory_mb() const;
  // Takes waiting members out of the pools, the newest first, until their memory adds up to at
  // least `mb` (or none is left), and removes them in the background. Refilling backs off meanwhile.
  void evict(std::int64_t mb);

 private:
  struct pool {
    pool(pool_config c, pool_sizing s) : cfg(std::move(c)), sizing(std::move(s)) {}
    pool_config cfg;
    pool_sizing sizing;
    std::vector<pool_member> ready;
    int making = 0;
    std::uint64_t claims = 0;
    std::uint64_t misses = 0;
    std::string last_error;
    int failures = 0;  // in a row: the next attempt backs off
    std::chrono::steady_clock::time_point retry_at{};
  };
  // Starts makers while there is work, a free slot and room; trims; sleeps until woken or due.
  boost::asio::awaitable<void> fill_forever();
  // One member of `p`, made and put in the pool (or backed off); in parallel with others.
  boost::asio::awaitable<void> make_one(std::shared_ptr<pool> p);
  // Creates, starts and waits for one member's agent (src/sandbox/pool_members.cpp).
  boost::asio::awaitable<result<pool_member>> make_member(const pool_config& which);
  pool* most_wanting(std::chrono::steady_clock::time_point now);
  // Removes the waiting members beyond each pool's target (a pool gone idle).
  void trim(std::chrono::steady_clock::time_point now);
  void back_off(pool& p, const std::string& why);
  void wake();

  boost::asio::any_io_executor executor_;
  std::vector<std::shared_ptr<pool>> pools_;
  const config& cfg_;
  store::database& db_;  // the instance id
  docker::engine& engine_;
  agent_connector& agent_;
  network_service& net_;
  transitions& transitions_;
  admission& admission_;
  bool hard_disk_ = false;
  int making_ = 0;  // across all pools, at most cfg.pool.max_parallel
  std::shared_ptr<boost::asio::steady_timer> wakeup_;
  bool started_ = false;
  bool stopping_ = false;
};

}  // namespace sandfort::sandbox
