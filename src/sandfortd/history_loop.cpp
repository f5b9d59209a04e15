#include "history_loop.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sandfort/store/console_session_store.hpp"

namespace sandfort::daemon {

namespace asio = boost::asio;

asio::awaitable<history_round> keep_history_bounded_once(store::database& db, const clock& clk,
                                                         const store_config& cfg, const bool& stopping) {
  history_round round;
  const auto space = db.space();
  round.disk_full = space.full;
  // On a full disk a prune would spend the reserve that deletes need; it waits for space.
  if (cfg.deleted_retention_s > 0 && !space.full) {
    const std::string cutoff = format_time(clk.now() - std::chrono::seconds(cfg.deleted_retention_s));
    while (!stopping) {
      auto pruned = store::sandbox_store(db).prune_deleted_sandboxes(cutoff, prune_batch_rows);
      if (!pruned) {
        // Busy: an admin command holds the write lock; the next round tries again.
        spdlog::warn("store: pruning deleted sandboxes: {}", pruned.err().message);
        break;
      }
      round.pruned += *pruned;
      if (*pruned < prune_batch_rows) break;
      co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    }
    if (round.pruned > 0)
      spdlog::info("store: pruned {} sandboxes deleted before {}", round.pruned, cutoff);
  }
  // An expired session opens nothing already (the lookup compares expires_at); this keeps the
  // table the size of the sessions alive.
  while (!stopping && !space.full) {
    auto pruned = store::console_session_store(db).prune_sessions(format_time(clk.now()), prune_batch_rows);
    if (!pruned) {
      spdlog::warn("store: pruning expired console sessions: {}", pruned.err().message);
      break;
    }
    round.sessions_pruned += static_cast<std::size_t>(*pruned);
    if (static_cast<std::size_t>(*pruned) < prune_batch_rows) break;
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  }
  // Sign-ins through an identity provider that never came back (a closed tab, a flood of starts).
  while (!stopping && !space.full) {
    auto pruned = store::console_session_store(db).prune_pending_logins(format_time(clk.now()), prune_batch_rows);
    if (!pruned) {
      spdlog::warn("store: pruning expired console sign-ins: {}", pruned.err().message);
      break;
    }
    if (static_cast<std::size_t>(*pruned) < prune_batch_rows) break;
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  }
  auto wal = db.checkpoint_wal();
  if (!wal) {
    // Expected while the disk is full: the frames stay in the WAL until the file can grow.
    if (space.full) spdlog::debug("store: WAL checkpoint: {}", wal.err().message);
    else spdlog::warn("store: WAL checkpoint: {}", wal.err().message);
  } else {
    round.wal_busy = wal->busy;
    round.wal_frames = wal->log_frames;
    if (wal->busy)
      spdlog::debug("store: WAL checkpoint busy ({} of {} frames copied); next round tries again",
                    wal->checkpointed_frames, wal->log_frames);
  }
  // After a restart (SQLite removes the WAL on close) or when the reserve could not be written.
  if (!space.full)
    if (auto r = db.keep_reserve(); !r) spdlog::warn("store: {}", r.err().message);
  co_return round;
}

asio::awaitable<void> keep_history_bounded(store::database& db, const clock& clk, const store_config& cfg,
                                           const bool& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  bool was_full = false;
  while (!stopping) {
    auto round = co_await keep_history_bounded_once(db, clk, cfg, stopping);
    if (round.disk_full != was_full) {
      auto space = db.space();
      if (round.disk_full)
        spdlog::warn("store: the state directory's disk is full ({}): changes are refused with 507, reads, deletes "
                     "and stops go on ({} frames of the reserve left)",
                     space.reason.empty() ? "space is short" : space.reason, db.reserve_frames_left());
      else
        spdlog::info("store: the state directory's disk has space again ({} MiB free): changes are accepted",
                     space.free_bytes >> 20);
      was_full = round.disk_full;
    }
    timer.expires_after(std::chrono::seconds(cfg.maintenance_interval_s));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

}  // namespace sandfort::daemon
