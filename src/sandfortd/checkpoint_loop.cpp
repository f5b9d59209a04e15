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
  if (auto room = db.admit(store::write_kind::change); !room) {
    spdlog::warn("audit checkpoints: not signed: {}", room.err().message);
    return;
  }
  auto made = audit::checkpoint_all(db, key, clk, cfg.export_path);
  if (!made) spdlog::error("audit checkpoints: {}", made.err().message);
  else if (*made > 0) spdlog::info("audit: signed {} checkpoint(s)", *made);
}

namespace {

// Like checkpoint_once, with each chain re-hashed on the background reader.
asio::awaitable<void> checkpoint_round(store::database& db, api::background_reader& reader,
                                       const audit::signing_key& key, const clock& clk, const audit_config& cfg) {
  // Signed once space returns (the chain is only longer then): the reserve is for deletes.
  if (auto room = db.admit(store::write_kind::change); !room) {
    spdlog::debug("audit checkpoints: waiting: {}", room.err().message);
    co_return;
  }
  auto orgs = store::audit_store(db).audit_org_ids();
  if (!orgs) {
    spdlog::error("audit checkpoints: {}", orgs.err().message);
    co_return;
  }
  int made = 0;
  for (const auto& org_id : *orgs) {
    auto read = [org_id, &key](store::database& r) { return audit::find_head_to_sign(r, org_id, key); };
    auto head = co_await reader.run(std::move(read), /*queue_anyway=*/true);
    result<std::optional<audit::checkpoint_record>> c = std::optional<audit::checkpoint_record>();
    if (!head) c = std::move(head).err();
    else if (*head) c = audit::sign_head(db, **head, key, format_time(clk.now()), cfg.export_path);
    if (!c) spdlog::error("audit checkpoints: {}", c.err().message);
    else if (*c) ++made;
  }
  if (made > 0) spdlog::info("audit: signed {} checkpoint(s)", made);
}

}  // namespace

asio::awaitable<void> checkpoint_forever(store::database& db, api::background_reader& reader,
                                         const audit::signing_key& key, const clock& clk, const audit_config& cfg,
                                         const bool& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopping) {
    co_await checkpoint_round(db, reader, key, clk, cfg);
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
  if (auto written = s.rate_limits.flush(); !written)
    spdlog::warn("audit: rate-limit refusals not written yet: {}", written.err().message);
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
