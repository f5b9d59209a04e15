// Docker's event stream as the sandbox service follows it. A container that dies, is removed or
// leaves the sandbox network behind sandfortd's back must not keep a row that says `started`
// with an address: Docker hands that address to the next container, and the preview router and
// the egress proxy would then serve another tenant's sandbox under this one's name. Events are
// only the reason to look: every decision is taken on what inspect says now, so a stale or
// replayed event cannot stop a running sandbox.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sandfort/sandbox/reconciler.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

std::string container_exit_reason(int exit_code, bool oom_killed, bool gvisor) {
  std::string why = "the container exited with code " + std::to_string(exit_code);
  if (oom_killed) return why + " (out of memory)";
  if (gvisor && exit_code == 2)
    why += " (gVisor's kernel ended: under gVisor a sandbox ends whole when it reaches its pids limit, which "
           "runsc's own threads count against)";
  return why;
}

namespace asio = boost::asio;

namespace {

constexpr std::chrono::milliseconds first_backoff{100};
constexpr std::chrono::milliseconds max_backoff{5'000};
// The follower replays from a little before it was called: the engine's clock and ours are the
// same host's, but the subscription itself takes a moment to reach the engine.
constexpr std::chrono::seconds replay_margin{1};
// oom events whose die never came (the kernel killed a child, not the init): forget them.
constexpr std::size_t max_oom_remembered = 1024;

// A paused sandbox's container is still there and can still die or vanish: followed like a started one.
bool lifecycle_owns(const std::string& state) { return state != "started" && state != "stopped" && state != "paused"; }

std::string attribute(const docker::engine_event& ev, const char* key) {
  auto it = ev.attributes.find(key);
  return it == ev.attributes.end() ? std::string{} : it->second;
}

asio::awaitable<bool> cancelled() {
  auto cs = co_await asio::this_coro::cancellation_state;
  co_return cs.cancelled() != asio::cancellation_type::none;
}

// Start-up reconciliation judges every row on its own snapshot; events that arrive meanwhile
// wait for it (the stream holds them), then are judged on what inspect says after it.
asio::awaitable<void> wait_until(const bool& reconciled) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!reconciled) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(use_tuple);
    if (co_await cancelled()) co_return;
  }
}

std::int64_t unix_nano(time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

asio::awaitable<void> reconciler::follow_container_events() {
  // Cancellation must end this loop, not throw out of the next wait.
  co_await asio::this_coro::throw_if_cancelled(false);
  docker::event_subscription sub;
  sub.container_labels = {std::string(label_instance) + "=" + db_.instance_id()};
  sub.container_actions = {"die", "oom", "destroy", "stop", "start", "pause", "unpause"};
  sub.networks = {cfg_.network.name};
  sub.network_actions = {"disconnect", "connect"};
  sub.since_nano = unix_nano(clock_.now() - replay_margin);

  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto backoff = first_backoff;
  bool ever_opened = false;
  for (;;) {
    bool opened = false;
    auto on_open = [&] {
      opened = true;
      // Events between the broken stream and this one are replayed by `since`, unless the
      // engine restarted (it keeps them in memory only): look at everything once.
      if (ever_opened) request_recheck_all();
      ever_opened = true;
    };
    auto on_event = [&](const docker::engine_event& ev) -> asio::awaitable<void> {
      if (ev.time_nano > sub.since_nano) sub.since_nano = ev.time_nano;
      co_await on_container_event(ev);
    };
    auto r = co_await engine_.follow_events(sub, on_event, on_open);
    if (co_await cancelled()) break;
    if (opened) backoff = first_backoff;
    spdlog::warn("docker events: {}; reconnecting in {} ms", r ? "the stream ended" : r.err().message, backoff.count());
    timer.expires_after(backoff);
    co_await timer.async_wait(use_tuple);
    if (co_await cancelled()) break;
    backoff = std::min(backoff * 2, max_backoff);
  }
  spdlog::info("docker events: no longer followed");
}

asio::awaitable<void> reconciler::on_container_event(const docker::engine_event& ev) {
  co_await wait_until(reconciled_);
  if (ev.lost) {
    spdlog::warn("docker events: an event was lost (too long or unreadable); re-checking every sandbox");
    request_recheck_all();
    co_return;
  }
  if (ev.type == "container" && ev.action == "oom" && !ev.container_id.empty()) {
    if (oom_seen_.size() >= max_oom_remembered) oom_seen_.clear();
    oom_seen_.insert(ev.container_id);
  }
  std::string sandbox_id = attribute(ev, label_sandbox);
  // A waiting member of the warm pool that died or was removed behind our back: replaced.
  if (ev.type == "container" && (ev.action == "die" || ev.action == "destroy") && pool_.lost(sandbox_id)) {
    if (auto r = co_await engine_.remove_container(ev.container_id); !r && r.err().code != errc::not_found)
      spdlog::warn("pool: cannot remove the dead member {}: {}", sandbox_id, r.err().message);
    co_return;
  }
  std::string address;  // network events: what the container holds on the sandbox network now
  if (ev.type == "network" && !ev.container_id.empty()) {
    // Network events carry no labels: the container says whose it is.
    auto info = co_await engine_.inspect_container(ev.container_id);
    if (info) {
      auto instance = info->labels.find(label_instance);
      auto owner = info->labels.find(label_sandbox);
      if (instance != info->labels.end() && instance->second == db_.instance_id() && owner != info->labels.end())
        sandbox_id = owner->second;
      if (auto it = info->addresses.find(cfg_.network.name); it != info->addresses.end()) address = it->second;
    }
  }
  if (!sandbox_id.empty()) co_await recheck_sandbox(sandbox_id);
  if (ev.action == "connect" && !address.empty()) co_await release_address(address, ev.container_id);
}

operation_marks::mark::mark(operation_marks& owner, std::string sandbox_id)
    : owner_(owner), sandbox_id_(std::move(sandbox_id)), owner_alive_(owner.alive_) {
  ++owner_.in_operation_[sandbox_id_];
}

operation_marks::mark::~mark() {
  if (!*owner_alive_) return;
  auto it = owner_.in_operation_.find(sandbox_id_);
  if (it == owner_.in_operation_.end() || --it->second > 0) return;
  owner_.in_operation_.erase(it);
  owner_.operations_ended(sandbox_id_);
}

void reconciler::operations_ended(const std::string& sandbox_id) {
  // The operation may have failed with the container dead or gone: what arrived meanwhile is
  // judged now, on what the row and Docker say after it.
  if (deferred_.erase(sandbox_id)) asio::co_spawn(executor_, recheck_sandbox(sandbox_id), asio::detached);
}

asio::awaitable<void> reconciler::recheck_sandbox(std::string sandbox_id) {
  if (in_operation(sandbox_id)) {
    deferred_.insert(sandbox_id);
    co_return;
  }
  auto rec = sandboxes_.find_live_sandbox(sandbox_id);
  if (!rec || lifecycle_owns(rec->state) || rec->container_id.empty()) co_return;
  std::string container = rec->container_id;
  auto info = co_await engine_.inspect_container(container);
  if (!info && info.err().code != errc::not_found) {
    spdlog::warn("docker events: cannot inspect the container of {}: {}", sandbox_id, info.err().message);
    co_return;
  }
  // The row again, now: the lifecycle code may have moved it while Docker answered. Nothing
  // below waits, so what is decided here is written before anyone else runs.
  if (in_operation(sandbox_id)) {
    deferred_.insert(sandbox_id);
    co_return;
  }
  auto cur = sandboxes_.find_live_sandbox(sandbox_id);
  if (!cur || lifecycle_owns(cur->state) || cur->container_id != container) co_return;
  bool had_address = !cur->address.empty();

  if (!info) {
    spdlog::warn("sandbox {}: its container {} was removed outside sandfortd", sandbox_id, container);
    oom_seen_.erase(container);
    cur->address.clear();
    (void)transitions_.set_state(*cur, "error", "the sandbox's container was removed outside sandfortd");
    transitions_.disconnect(sandbox_id);
    co_return;
  }
  if (cur->state == "stopped") co_return;  // stopped and still there: nothing to correct
  if (!info->running) {
    bool oom = info->oom_killed || oom_seen_.erase(container) > 0;
    std::string why = container_exit_reason(info->exit_code, oom, runs_on_gvisor(*cur));
    spdlog::warn("sandbox {}: {}", sandbox_id, why);
    cur->address.clear();
    (void)transitions_.set_state(*cur, "stopped", why, audit::system_actor(), {}, std::nullopt,
                                 oom ? stop_reason::oom : stop_reason::exited);
    transitions_.disconnect(sandbox_id);
    co_return;
  }
  // Paused or thawed with `docker pause`/`unpause`: the row follows, so calls answer 409 while
  // it is frozen instead of hanging on an agent that cannot answer.
  if (info->paused != (cur->state == "paused")) {
    const std::string now_state = info->paused ? "paused" : "started";
    spdlog::warn("sandbox {}: its container was {} outside sandfortd", sandbox_id, info->paused ? "paused" : "unpaused");
    if (!info->paused) activity_.touch(sandbox_id);
    (void)transitions_.set_state(*cur, now_state, {}, audit::system_actor(),
                                 info->paused ? "sandbox.pause" : "sandbox.resume");
  }
  std::string address;
  if (auto it = info->addresses.find(cfg_.network.name); it != info->addresses.end()) address = it->second;
  if (address == cur->address) co_return;
  spdlog::warn("sandbox {}: its address on {} changed from '{}' to '{}'", sandbox_id, cfg_.network.name, cur->address,
               address);
  cur->address = address;
  (void)transitions_.set_state(*cur, cur->state, cur->error_message);
  // Whatever was relayed to the old address is no longer this sandbox's.
  if (had_address) transitions_.disconnect(sandbox_id);
}

void reconciler::request_recheck_all() {
  if (rechecking_all_) {
    recheck_all_again_ = true;
    return;
  }
  rechecking_all_ = true;
  asio::co_spawn(executor_, recheck_all(), asio::detached);
}

asio::awaitable<void> reconciler::recheck_all() {
  // A hostile image can make every event of its sandbox a lost one (a label over the line
  // limit): sweeps never pile up, and never come closer than this.
  constexpr std::chrono::milliseconds min_spacing{1'000};
  co_await wait_until(reconciled_);
  asio::steady_timer spacing(executor_);
  do {
    recheck_all_again_ = false;
    spacing.expires_after(min_spacing);
    if (auto rows = sandboxes_.list_live_sandboxes_all_orgs())
      for (const auto& rec : *rows)
        if (!lifecycle_owns(rec.state)) co_await recheck_sandbox(rec.id);
    if (recheck_all_again_) co_await spacing.async_wait(use_tuple);
  } while (recheck_all_again_);
  rechecking_all_ = false;
}

asio::awaitable<void> reconciler::release_address(std::string address, std::string holder_container) {
  auto rows = sandboxes_.list_live_sandboxes_all_orgs();
  if (!rows) co_return;
  for (const auto& rec : *rows) {
    if (rec.address != address || rec.container_id == holder_container) continue;
    // Docker gives one address to one container: this row's claim is stale (an event about its
    // container was lost or is still on its way). The recheck finds out what became of it.
    spdlog::warn("sandbox {} still claimed {}, which Docker gave to container {}", rec.id, address, holder_container);
    co_await recheck_sandbox(rec.id);
    auto cur = sandboxes_.find_live_sandbox(rec.id);
    if (cur && cur->address == address && cur->container_id != holder_container && !in_operation(cur->id)) {
      cur->address.clear();
      (void)transitions_.set_state(*cur, cur->state, cur->error_message);
      transitions_.disconnect(cur->id);
    }
  }
}

}  // namespace sandfort::sandbox
