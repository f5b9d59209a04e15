#include "checkpoint_loop.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sandfort/audit/checkpointer.hpp"

namespace sandfort::daemon {

namespace asio = boost::asio;

void checkpoint_once(store::database& db, const audit::signing_key& key, const clock& clk, const audit_config& cfg) {
  auto made = audit::checkpoint_all(db, key, clk, cfg.export_path);
  if (!made) spdlog::error("audit checkpoints: {}", made.err().message);
  else if (*made > 0) spdlog::info("audit: signed {} checkpoint(s)", *made);
}

asio::awaitable<void> checkpoint_forever(store::database& db, const audit::signing_key& key, const clock& clk,
                                         const audit_config& cfg, const bool& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopping) {
    checkpoint_once(db, key, clk, cfg);
    timer.expires_after(std::chrono::seconds(cfg.checkpoint_interval_s));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

void summarize_once(summaries s) {
  if (auto written = s.auth_failures.flush(); !written)
    spdlog::warn("audit: authentication failures not written yet: {}", written.err().message);
  if (auto written = s.egress.flush(); !written)
    spdlog::warn("audit: egress decisions not written yet: {}", written.err().message);
}

asio::awaitable<void> summarize_forever(summaries s, const audit_config& cfg, const bool& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopping) {
    timer.expires_after(std::chrono::seconds(cfg.summary_interval_s));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    summarize_once(s);
  }
}

}  // namespace sandfort::daemon
