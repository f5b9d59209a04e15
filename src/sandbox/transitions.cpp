// A sandbox's transitions (transitions.hpp): its state changes with their audit events, the
// waiters they wake, its container's removal, and what closes when it stops.
#include "sandfort/sandbox/transitions.hpp"

#include <boost/asio/steady_timer.hpp>

#include "sandfort/http/use_tuple.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace asio = boost::asio;

transitions::transitions(asio::any_io_executor executor, const config& cfg, store::database& db,
                         docker::engine& engine, agent_connector& agent, network_service& net, const clock& clk)
    : executor_(std::move(executor)), cfg_(cfg), db_(db), sandboxes_(db),
      guardrails_(db), engine_(engine), agent_(agent), net_(net), clock_(clk), journal_(db, clk) {}

void transitions::notify(const std::string& sandbox_id) {
  auto it = waiters_.find(sandbox_id);
  if (it == waiters_.end()) return;
  for (auto& timer : it->second) timer->cancel();
  waiters_.erase(it);
}

asio::awaitable<void> transitions::wait_change(const std::string& sandbox_id,
                                               std::chrono::steady_clock::time_point until) {
  auto timer = std::make_shared<asio::steady_timer>(executor_, until);
  waiters_[sandbox_id].push_back(timer);
  co_await timer->async_wait(use_tuple);
  if (auto it = waiters_.find(sandbox_id); it != waiters_.end()) {
    std::erase(it->second, timer);
    if (it->second.empty()) waiters_.erase(it);
  }
}

result<void> transitions::set_state(store::sandbox_record& rec, const std::string& state, const std::string& message,
                                    const audit::actor& who, const std::string& action,
                                    const std::optional<store::sandbox_deadline>& deadline, const char* reason) {
  if (reason == nullptr && state == "error") reason = stop_reason::error;
  const std::string from = rec.state;
  rec.state = state;
  rec.error_message = message;
  rec.updated_at = format_time(clock_.now());
  auto r = journal_.record_change(
      {rec.org_id}, who,
      [&]() -> result<void> {
        if (auto u = sandboxes_.update_sandbox(rec); !u) return u;
        if (deadline) return guardrails_.set_sandbox_deadline(*deadline);
        return state == "stopped" ? result<void>() : guardrails_.clear_sandbox_deadline(rec.id);
      },
      [&] {
        nlohmann::json details = {{"state", state}, {"from", from}};
        if (!message.empty()) details["message"] = message;
        if (deadline) details["delete_after"] = deadline->delete_after;
        if (reason != nullptr && (state == "stopped" || state == "error")) details["reason"] = reason;
        return audit::record{action.empty() ? "sandbox.state" : action, rec.id, "ok", std::move(details)};
      });
  notify(rec.id);
  return r;
}

task<void> transitions::destroy_container(const store::sandbox_record& rec) {
  std::vector<std::string> ids;
  if (!rec.container_id.empty()) {
    ids.push_back(rec.container_id);
  } else {
    // Created but not yet recorded (a delete racing provisioning): its labels name it.
    std::vector<std::string> labels = {std::string(label_sandbox) + "=" + rec.id,
                                       std::string(label_instance) + "=" + db_.instance_id()};
    auto found = co_await engine_.list_containers(labels);
    if (!found) co_return std::move(found).err();
    for (const auto& c : *found) ids.push_back(c.id);
  }
  for (const auto& id : ids) {
    auto r = co_await engine_.remove_container(id);
    if (!r && r.err().code != errc::not_found) co_return r;
  }
  co_return ok_t{};
}

void transitions::disconnect(const std::string& sandbox_id) {
  agent_.forget(sandbox_id);
  net_.disconnect(sandbox_id);
}

asio::awaitable<error> transitions::explain_unreachable_agent(store::sandbox_record& rec, error e) {
  auto info = co_await engine_.inspect_container(rec.container_id);
  // Under gVisor a limit reached ends the whole sandbox, and its links home end a moment before
  // Docker has heard from runsc that it exited: a call that lost its agent asks again, for up to
  // 3 s, so that it answers why (out of memory, its pids limit) instead of a bare 503.
  const bool gvisor = runs_on_gvisor(rec);
  if (gvisor && info && info->running) {
    auto executor = co_await asio::this_coro::executor;
    asio::steady_timer pause(executor);
    for (int i = 0; i < 30 && info && info->running; ++i) {
      pause.expires_after(std::chrono::milliseconds(100));
      co_await pause.async_wait(use_tuple);
      auto again = co_await engine_.inspect_container(rec.container_id);
      info = std::move(again);
    }
  }
  if (info && !info->running) {
    std::string why = container_exit_reason(info->exit_code, info->oom_killed, gvisor);
    (void)set_state(rec, "stopped", why, audit::system_actor(), {}, std::nullopt,
                    info->oom_killed ? stop_reason::oom : stop_reason::exited);
    co_return make_error(errc::conflict, "sandbox " + rec.id + " is stopped: " + why);
  }
  co_return e;
}

task<void> transitions::start_and_wait(store::sandbox_record& rec) {
  agent_.forget(rec.id);  // a new init process: learn it again
  if (auto r = prepare_agent(rec); !r) co_return r;  // a door for a sandbox that dials home
  if (auto r = co_await engine_.start_container(rec.container_id); !r) co_return r;
  if (auto r = co_await wait_for_agent(rec); !r) co_return r;
  co_return co_await net_.refresh_address(rec);
}

result<void> transitions::prepare_agent(const store::sandbox_record& rec) {
  return agent_.prepare(agent_address_of(rec));
}

task<void> transitions::wait_for_agent(const store::sandbox_record& rec) {
  // The agent is ready when it answers /health; until its socket exists a connect fails at
  // once, so a short backoff keeps start-up latency near the agent's own start time.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(cfg_.agent_start_timeout_s);
  auto backoff = std::chrono::milliseconds(2);
  asio::steady_timer timer(executor_);
  for (int attempt = 1;; ++attempt) {
    if (auto h = co_await agent_.health(agent_address_of(rec), std::chrono::milliseconds(500)); h) co_return ok_t{};
    if (attempt % 16 == 0) {
      auto info = co_await engine_.inspect_container(rec.container_id);
      if (!info) co_return std::move(info).err();
      if (!info->running)
        co_return make_error(errc::internal, "the sandbox's container exited with code " +
                                                 std::to_string(info->exit_code) + " before its agent answered" +
                                                 (info->oom_killed ? " (out of memory)" : ""));
    }
    if (std::chrono::steady_clock::now() >= deadline)
      co_return make_error(errc::unavailable, "the sandbox agent did not answer within " +
                                                  std::to_string(cfg_.agent_start_timeout_s) + " s");
    timer.expires_after(backoff);
    co_await timer.async_wait(use_tuple);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace sandfort::sandbox
