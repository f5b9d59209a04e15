#include "history_loop.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

namespace sandfort::daemon {

namespace asio = boost::asio;

asio::awaitable<history_round> keep_history_bounded_once(store::database& db, const clock& clk,
                                                         const store_config& cfg, const bool& stopping) {
  history_round round;
  if (cfg.deleted_retention_s > 0) {
    const std::string cutoff = format_time(clk.now() - std::chrono::seconds(cfg.deleted_retention_s));
    while (!stopping) {
      auto pruned = db.prune_deleted_sandboxes(cutoff, prune_batch_rows);
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
  auto wal = db.checkpoint_wal();
  if (!wal) {
    spdlog::warn("store: WAL checkpoint: {}", wal.err().message);
  } else {
    round.wal_busy = wal->busy;
    round.wal_frames = wal->log_frames;
    if (wal->busy)
      spdlog::debug("store: WAL checkpoint busy ({} of {} frames copied); next round tries again",
                    wal->checkpointed_frames, wal->log_frames);
  }
  co_return round;
}

asio::awaitable<void> keep_history_bounded(store::database& db, const clock& clk, const store_config& cfg,
                                           const bool& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopping) {
    co_await keep_history_bounded_once(db, clk, cfg, stopping);
    timer.expires_after(std::chrono::seconds(cfg.maintenance_interval_s));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

}  // namespace sandfort::daemon
