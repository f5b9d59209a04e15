#pragma once
// The store's upkeep, so that it stays the same size under steady use: rows of sandboxes deleted
// longer than store.deleted_retention_s ago are pruned (the audit log is the permanent record),
// so are console sessions past their expiry, and the WAL is checkpointed (its file kept as the store's reserve), every
// store.maintenance_interval_s. On a full state disk only the checkpoint runs.

#include <boost/asio/awaitable.hpp>
#include <cstddef>

#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::daemon {

// Rows per delete statement: a batch holds the write lock for a few milliseconds, and the I/O
// thread serves whatever is waiting before the next one.
constexpr std::size_t prune_batch_rows = 500;

struct history_round {
  std::size_t pruned = 0;
  std::size_t sessions_pruned = 0;  // console sessions past their expiry
  bool wal_busy = false;  // a reader kept the WAL: it was copied as far as possible, not emptied
  int wal_frames = -1;    // frames in the WAL before it was emptied (-1: unknown)
  bool disk_full = false;  // the state directory's disk was full: nothing was pruned
};

// One round on the I/O thread; stops pruning between batches once `stopping` is seen.
boost::asio::awaitable<history_round> keep_history_bounded_once(store::database& db, const clock& clk,
                                                                const store_config& cfg, const bool& stopping);

// A round now and then every store.maintenance_interval_s, until `stopping` (or the io_context) ends.
boost::asio::awaitable<void> keep_history_bounded(store::database& db, const clock& clk, const store_config& cfg,
                                                  const bool& stopping);

}  // namespace sandfort::daemon
