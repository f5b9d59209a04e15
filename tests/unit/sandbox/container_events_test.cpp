// The Docker event follower over the fake engine: rows follow what happens to their containers
// behind sandfortd's back (exit, OOM, removal, network changes), decisions rest on inspect and
// not on the event, rows the lifecycle code owns are left alone, and the stream is re-opened
// with `since` after it breaks.

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>
#include <catch2/catch.hpp>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

// Long enough for the follower to run everything an emit() woke it for (the fake answers at once).
constexpr auto follower_settle = 30ms;

// Runs the follower while script runs, then cancels it; fails when it does not end.
template <typename Script>
void with_follower(fixture& f, Script script) {
  asio::cancellation_signal stop;
  bool ended = false;
  asio::co_spawn(f.ioc, f.svc->reconciliation().follow_container_events(),
                 asio::bind_cancellation_slot(stop.slot(), [&](std::exception_ptr e) {
                   ended = true;
                   if (e) std::rethrow_exception(e);
                 }));
  auto driver = [&]() -> asio::awaitable<int> {
    co_await sleep_for(follower_settle);  // the follower subscribes
    co_await script();
    stop.emit(asio::cancellation_type::terminal);
    co_return 0;
  };
  f.run(driver(), 10s);
  CHECK(ended);
  CHECK(f.engine.streams_open == 0);
}

struct watched {
  std::vector<std::string> disconnected;
  explicit watched(fixture& f) {
    f.svc->network().on_disconnect([this](const std::string& id) { disconnected.push_back(id); });
  }
};

store::sandbox_record row(fixture& f, const std::string& id) {
  auto r = store::sandbox_store(*f.db).find_live_sandbox(id);
  if (!r) throw std::runtime_error("no live row " + id);
  return *r;
}

}  // namespace

TEST_CASE("events: the follower subscribes to our containers and the sandbox network, from before it started",
          "[sandbox][events]") {
  fixture f;
  with_follower(f, []() -> asio::awaitable<void> { co_return; });
  REQUIRE(f.engine.subscriptions.size() == 1);
  const auto& sub = f.engine.subscriptions.front();
  CHECK(sub.container_labels == std::vector<std::string>{"io.sandfort.instance=" + f.db->instance_id()});
  for (const char* action : {"die", "oom", "destroy", "stop", "start"})
    CHECK(std::count(sub.container_actions.begin(), sub.container_actions.end(), action) == 1);
  CHECK(sub.networks == std::vector<std::string>{f.cfg.network.name});
  CHECK(sub.network_actions == std::vector<std::string>{"disconnect", "connect"});
  // A second before the fixed clock's now: events while the subscription is on its way count.
  auto now_nano = std::chrono::duration_cast<std::chrono::nanoseconds>(f.clk.t.time_since_epoch()).count();
  CHECK(sub.since_nano == now_nano - 1'000'000'000);
}

TEST_CASE("events: a container that exits stops its row with the exit code, clears the address, disconnects",
          "[sandbox][events]") {
  fixture f;
  watched w(f);
  auto v = f.create_started();
  auto* c = f.engine.of_sandbox(v.id);
  REQUIRE(c);
  REQUIRE_FALSE(row(f, v.id).address.empty());
  f.agent.forgotten.clear();

  with_follower(f, [&]() -> asio::awaitable<void> {
    f.engine.kill_container(*c, 137);
    co_await sleep_for(follower_settle);
  });
  auto r = row(f, v.id);
  CHECK(r.state == "stopped");
  CHECK(r.error_message == "the container exited with code 137");
  CHECK(r.address.empty());
  CHECK(w.disconnected == std::vector<std::string>{v.id});
  CHECK(std::count(f.agent.forgotten.begin(), f.agent.forgotten.end(), v.id) >= 1);
  // The API says so too, and the sandbox can be started again.
  auto got = f.get(f.org_a.id, v.id);
  REQUIRE(got.ok());
  CHECK(got->state == "stopped");
  auto started = f.run(f.svc->start(f.org_a.id, v.id));
  REQUIRE(started.ok());
  CHECK(started->state == "started");
}

TEST_CASE("events: an OOM kill says so, from inspect or from the oom event alone", "[sandbox][events]") {
  fixture f;
  auto a = f.create_started();
  auto b = f.create_started();
  auto* ca = f.engine.of_sandbox(a.id);
  auto* cb = f.engine.of_sandbox(b.id);
  with_follower(f, [&]() -> asio::awaitable<void> {
    f.engine.kill_container(*ca, 137, true);  // inspect says OOMKilled
    // b: the oom event arrives, but inspect does not say OOMKilled (a child was killed, then
    // init exited with it).
    f.engine.emit(f.engine.container_event(*cb, "oom"));
    f.engine.kill_container(*cb, 137, false);
    co_await sleep_for(follower_settle);
  });
  CHECK(row(f, a.id).error_message == "the container exited with code 137 (out of memory)");
  CHECK(row(f, b.id).error_message == "the container exited with code 137 (out of memory)");
}

TEST_CASE("events: a container removed behind sandfortd's back makes its row error", "[sandbox][events]") {
  fixture f;
  watched w(f);
  auto started = f.create_started();
  auto stopped = f.create_started();
  REQUIRE(f.run(f.svc->stop(f.org_a.id, stopped.id)).ok());
  w.disconnected.clear();
  with_follower(f, [&]() -> asio::awaitable<void> {
    f.engine.remove_behind_back(f.engine.of_sandbox(started.id)->id);
    f.engine.remove_behind_back(f.engine.of_sandbox(stopped.id)->id);
    co_await sleep_for(follower_settle);
  });
  for (const auto& id : {started.id, stopped.id}) {
    auto r = row(f, id);
    CHECK(r.state == "error");
    CHECK(r.error_message == "the sandbox's container was removed outside sandfortd");
    CHECK(r.address.empty());
    CHECK(std::count(w.disconnected.begin(), w.disconnected.end(), id) >= 1);
  }
}

TEST_CASE("events: leaving the sandbox network clears the address, joining it again restores it",
          "[sandbox][events]") {
  fixture f;
  watched w(f);
  auto v = f.create_started();
  auto* c = f.engine.of_sandbox(v.id);
  std::string address = row(f, v.id).address;
  REQUIRE_FALSE(address.empty());
  std::string net = f.cfg.network.name;

  with_follower(f, [&]() -> asio::awaitable<void> {
    f.engine.disconnect_network(*c, net);
    co_await sleep_for(follower_settle);
    auto r = row(f, v.id);
    CHECK(r.state == "started");  // still running: only the address is gone
    CHECK(r.address.empty());
    CHECK(w.disconnected == std::vector<std::string>{v.id});

    f.engine.connect_network(*c, net, "10.213.0.77");
    co_await sleep_for(follower_settle);
  });
  auto r = row(f, v.id);
  CHECK(r.state == "started");
  CHECK(r.address == "10.213.0.77");
  CHECK(w.disconnected.size() == 1);  // gaining an address closes nothing
}

TEST_CASE("events: stale or replayed events do not touch a running sandbox", "[sandbox][events]") {
  fixture f;
  watched w(f);
  auto v = f.create_started();
  auto* c = f.engine.of_sandbox(v.id);
  auto before = row(f, v.id);
  with_follower(f, [&]() -> asio::awaitable<void> {
    auto die = f.engine.container_event(*c, "die");  // an old die: the container runs now
    die.attributes["exitCode"] = "1";
    f.engine.emit(die);
    f.engine.emit(f.engine.container_event(*c, "stop"));
    f.engine.emit(f.engine.container_event(*c, "start"));
    f.engine.emit(f.engine.network_event(c->id, f.cfg.network.name, "disconnect"));
    co_await sleep_for(follower_settle);
  });
  auto after = row(f, v.id);
  CHECK(after.state == "started");
  CHECK(after.address == before.address);
  CHECK(after.error_message.empty());
  CHECK(w.disconnected.empty());
}

TEST_CASE("events: rows the lifecycle code owns are left alone", "[sandbox][events]") {
  fixture f;
  watched w(f);
  // A row still being created whose container already died: provisioning reports that itself.
  store::sandbox_record creating;
  creating.id = new_id("sbx-");
  creating.org_id = f.org_a.id;
  creating.state = "creating";
  creating.snapshot = f.cfg.default_image;
  creating.spec_json = spec_to_json({});
  creating.created_at = creating.updated_at = format_time(f.clk.now());
  auto& c = f.engine.add_container("c-creating", {{label_sandbox, creating.id}, {label_instance, f.db->instance_id()}},
                                   false, 1);
  creating.container_id = c.id;
  REQUIRE(store::sandbox_store(*f.db).insert_sandbox(creating).ok());
  // A stopped row whose container dies again (replayed): its message stays.
  auto stopped = f.create_started();
  REQUIRE(f.run(f.svc->stop(f.org_a.id, stopped.id)).ok());
  w.disconnected.clear();

  with_follower(f, [&]() -> asio::awaitable<void> {
    f.engine.emit(f.engine.container_event(c, "die"));
    auto* s = f.engine.of_sandbox(stopped.id);
    f.engine.kill_container(*s, 137);
    co_await sleep_for(follower_settle);
  });
  CHECK(row(f, creating.id).state == "creating");
  CHECK(row(f, stopped.id).state == "stopped");
  CHECK(row(f, stopped.id).error_message.empty());
  CHECK(w.disconnected.empty());
}

TEST_CASE("events: containers of another daemon or without a sandbox label are ignored", "[sandbox][events]") {
  fixture f;
  watched w(f);
  auto v = f.create_started();
  auto* mine = f.engine.of_sandbox(v.id);
  // Another daemon's container claiming our sandbox id: the subscription's label filter drops it.
  auto& theirs = f.engine.add_container("other", {{label_sandbox, v.id}, {label_instance, "someone-else"}}, false, 1);
  with_follower(f, [&]() -> asio::awaitable<void> {
    f.engine.emit(f.engine.container_event(theirs, "die"));
    f.engine.emit(f.engine.container_event(theirs, "destroy"));
    // Ours by instance, but no sandbox label, and a network event on another network.
    auto& unlabelled = f.engine.add_container("unlabelled", {{label_instance, f.db->instance_id()}}, false, 2);
    f.engine.emit(f.engine.container_event(unlabelled, "die"));
    f.engine.emit(f.engine.network_event(mine->id, "bridge", "disconnect"));
    co_await sleep_for(follower_settle);
  });
  CHECK(row(f, v.id).state == "started");
  CHECK(w.disconnected.empty());
}

TEST_CASE("events: a broken stream is re-opened with since, and everything is re-checked", "[sandbox][events]") {
  fixture f;
  auto a = f.create_started();
  auto b = f.create_started();
  auto* ca = f.engine.of_sandbox(a.id);
  auto* cb = f.engine.of_sandbox(b.id);
  std::int64_t last_seen = 0;
  with_follower(f, [&]() -> asio::awaitable<void> {
    f.engine.kill_container(*ca, 3);
    co_await sleep_for(follower_settle);
    last_seen = f.engine.event_clock_nano;
    f.engine.end_stream();
    // While nobody listens b dies, and the engine forgot the event (it restarted).
    cb->running = false;
    cb->status = "exited";
    cb->exit_code = 9;
    co_await sleep_for(500ms);  // the first back-off is 100 ms
  });
  REQUIRE(f.engine.subscriptions.size() == 2);
  CHECK(f.engine.subscriptions[1].since_nano == last_seen);
  CHECK(row(f, a.id).error_message == "the container exited with code 3");
  CHECK(row(f, b.id).state == "stopped");
  CHECK(row(f, b.id).error_message == "the container exited with code 9");
}

TEST_CASE("events: the follower backs off while Docker refuses, and stops when cancelled", "[sandbox][events]") {
  fixture f;
  f.engine.follow_error = make_error(errc::unavailable, "Docker is unreachable (fake)");
  auto t0 = std::chrono::steady_clock::now();
  with_follower(f, [&]() -> asio::awaitable<void> { co_await sleep_for(700ms); });
  auto elapsed = std::chrono::steady_clock::now() - t0;
  // 100 + 200 + 400 ms between attempts: four attempts in 730 ms, not hundreds.
  CHECK(f.engine.subscriptions.size() >= 3);
  CHECK(f.engine.subscriptions.size() <= 5);
  CHECK(elapsed < 2s);
}

TEST_CASE("events: a lost event makes the follower re-check every sandbox", "[sandbox][events]") {
  fixture f;
  auto v = f.create_started();
  auto* c = f.engine.of_sandbox(v.id);
  with_follower(f, [&]() -> asio::awaitable<void> {
    c->running = false;  // its die event was the line that was too long
    c->status = "exited";
    c->exit_code = 137;
    docker::engine_event lost;
    lost.lost = true;
    f.engine.emit(lost);
    co_await sleep_for(follower_settle);
  });
  CHECK(row(f, v.id).state == "stopped");
  CHECK(row(f, v.id).error_message == "the container exited with code 137");
}

TEST_CASE("events: an address Docker gives to another container is taken from a row that still claims it",
          "[sandbox][events]") {
  fixture f;
  watched w(f);
  auto a = f.create_started();
  auto b = f.create_started();
  auto* ca = f.engine.of_sandbox(a.id);
  std::string address = row(f, a.id).address;
  std::string b_address = row(f, b.id).address;
  // a's container died and its events never arrived; then a container joins with its address.
  ca->running = false;
  ca->status = "exited";
  ca->exit_code = 137;
  ca->addresses.clear();
  auto& newcomer = f.engine.add_container("newcomer", {}, true);
  with_follower(f, [&]() -> asio::awaitable<void> {
    f.engine.connect_network(newcomer, f.cfg.network.name, address);
    co_await sleep_for(follower_settle);
  });
  auto ra = row(f, a.id);
  CHECK(ra.state == "stopped");
  CHECK(ra.address.empty());
  CHECK(row(f, b.id).address == b_address);
  CHECK(w.disconnected == std::vector<std::string>{a.id});
}

TEST_CASE("events: what arrives during start-up reconciliation waits for it", "[sandbox][events]") {
  fixture f(false);
  // A row left started by a previous run whose container was removed while the daemon was down.
  store::sandbox_record rec;
  rec.id = new_id("sbx-");
  rec.org_id = f.org_a.id;
  rec.state = "started";
  rec.snapshot = f.cfg.default_image;
  rec.spec_json = spec_to_json({});
  rec.created_at = rec.updated_at = format_time(f.clk.now());
  rec.container_id = "ctr-gone";
  rec.address = "10.213.0.9";
  REQUIRE(store::sandbox_store(*f.db).insert_sandbox(rec).ok());
  docker::container_info gone;
  gone.id = "ctr-gone";
  gone.labels = {{label_sandbox, rec.id}, {label_instance, f.db->instance_id()}};
  with_follower(f, [&]() -> asio::awaitable<void> {
    f.engine.emit(f.engine.container_event(gone, "destroy"));  // replayed by `since`
    co_await sleep_for(100ms);
    CHECK(row(f, rec.id).state == "started");  // held until reconciliation has judged
    auto report = co_await f.svc->reconciliation().reconcile();
    CHECK(report.ok());
    co_await sleep_for(follower_settle);
  });
  auto r = row(f, rec.id);
  CHECK(r.state == "error");
  CHECK(r.error_message == "the sandbox's container vanished");  // reconcile's word stands
}

TEST_CASE("events: a stop sandfortd itself is making is left to it, a failed one is judged after",
          "[sandbox][events]") {
  fixture f;
  watched w(f);
  auto v = f.create_started();
  auto* c = f.engine.of_sandbox(v.id);
  f.engine.stop_delay = 100ms;
  with_follower(f, [&]() -> asio::awaitable<void> {
    std::optional<result<sandbox_view>> stopped;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> { stopped.emplace(co_await f.svc->stop(f.org_a.id, v.id)); }, asio::detached);
    co_await sleep_for(20ms);
    f.engine.emit(f.engine.container_event(*c, "die"));  // the stop's own die, mid-stop
    co_await sleep_for(follower_settle);
    CHECK(row(f, v.id).state == "started");  // not the follower's to judge yet
    while (!stopped) co_await sleep_for(5ms);
    CHECK(stopped->ok());
    co_await sleep_for(follower_settle);
  });
  auto r = row(f, v.id);
  CHECK(r.state == "stopped");
  CHECK(r.error_message.empty());  // a stop the user asked for is no crash
  CHECK(w.disconnected == std::vector<std::string>{v.id});

  // The same, but Docker's answer is an error although the container did die: once stop() has
  // given up, the follower looks again and finds it dead.
  REQUIRE(f.run(f.svc->start(f.org_a.id, v.id)).ok());
  f.engine.stop_error = make_error(errc::unavailable, "Docker timed out (fake)");
  with_follower(f, [&]() -> asio::awaitable<void> {
    std::optional<result<sandbox_view>> stopped;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> { stopped.emplace(co_await f.svc->stop(f.org_a.id, v.id)); }, asio::detached);
    co_await sleep_for(20ms);
    f.engine.emit(f.engine.container_event(*f.engine.of_sandbox(v.id), "die"));
    while (!stopped) co_await sleep_for(5ms);
    CHECK_FALSE(stopped->ok());
    co_await sleep_for(follower_settle);
  });
  r = row(f, v.id);
  CHECK(r.state == "stopped");
  CHECK(r.error_message == "the container exited with code 0");
}

TEST_CASE("events: overlapping operation marks defer the judgement until the last one ends", "[sandbox][events]") {
  fixture f;
  watched w(f);
  auto v = f.create_started();
  auto* c = f.engine.of_sandbox(v.id);
  auto& rc = f.svc->reconciliation();
  with_follower(f, [&]() -> asio::awaitable<void> {
    auto first = std::make_unique<reconciler::operation_mark>(rc, v.id);
    std::optional<reconciler::operation_mark> second;
    second.emplace(rc, v.id);  // e.g. a snapshot's commit during a stop
    f.engine.kill_container(*c, 3);
    co_await sleep_for(follower_settle);
    CHECK(row(f, v.id).state == "started");
    first.reset();
    co_await sleep_for(follower_settle);
    CHECK(row(f, v.id).state == "started");  // one mark is still held
    second.reset();
    co_await sleep_for(follower_settle);
  });
  auto r = row(f, v.id);
  CHECK(r.state == "stopped");
  CHECK(r.error_message == "the container exited with code 3");
  CHECK(w.disconnected == std::vector<std::string>{v.id});
}

TEST_CASE("why a container stopped: out of memory, and gVisor's exit code 2 explained") {
  using sandfort::sandbox::container_exit_reason;
  CHECK(container_exit_reason(137, true) == "the container exited with code 137 (out of memory)");
  CHECK(container_exit_reason(137, true, true) == "the container exited with code 137 (out of memory)");
  CHECK(container_exit_reason(2, false) == "the container exited with code 2");
  // Under runsc, 2 is gVisor's own kernel failing (its threads past the pids limit).
  auto gvisor = container_exit_reason(2, false, true);
  CHECK(gvisor.rfind("the container exited with code 2 (gVisor's kernel ended", 0) == 0);
  CHECK(gvisor.find("pids limit") != std::string::npos);
  CHECK(container_exit_reason(3, false, true) == "the container exited with code 3");
}
