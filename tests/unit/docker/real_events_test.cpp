// unix_engine::follow_events against the real Docker engine: a container we start and kill is
// seen starting and dying with its exit code, and `since` replays what was missed.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "sandfort/docker/engine.hpp"
#include "support.hpp"
#include "unix_engine.hpp"

using namespace sandfort;
using namespace sandfort::docker;
using test::real_engine;
using test::run;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

container_spec watched_sleeper(const std::string& token) {
  container_spec spec;
  spec.name = "sandfort-test-events-" + token;
  spec.image = test::base_image;
  spec.entrypoint = {"sleep", "300"};
  spec.labels = {{test::test_label, token}};
  spec.network_mode = "none";
  spec.memory_bytes = 64ll << 20;
  spec.pids_limit = 64;
  spec.stop_timeout_s = 1;
  return spec;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
}

// Follows sub until `until` says enough (checked after each event) or 30 s pass; `meanwhile`
// runs once the stream is open.
struct following {
  std::vector<engine_event> seen;
  std::optional<result<void>> ended;
  bool opened = false;
  std::chrono::steady_clock::time_point last_event_at;
};

following follow_until(unix_engine& engine, event_subscription sub, std::function<bool(const following&)> until,
                        std::function<asio::awaitable<void>()> meanwhile) {
  asio::io_context ioc;
  asio::cancellation_signal stop;
  following f;
  auto on_event = [&](const engine_event& ev) -> asio::awaitable<void> {
    f.seen.push_back(ev);
    f.last_event_at = std::chrono::steady_clock::now();
    if (until(f)) asio::post(ioc, [&] { stop.emit(asio::cancellation_type::terminal); });
    co_return;
  };
  asio::co_spawn(ioc, engine.follow_events(sub, on_event, [&] { f.opened = true; }),
                 asio::bind_cancellation_slot(stop.slot(), [&](std::exception_ptr e, result<void> r) {
                   if (e) std::rethrow_exception(e);
                   f.ended = std::move(r);
                 }));
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 500 && !f.opened && !f.ended; ++i) co_await sleep_for(10ms);
    if (f.opened) co_await meanwhile();
    asio::steady_timer deadline(ioc, 30s);
    co_await deadline.async_wait(asio::as_tuple(asio::use_awaitable));
  }, asio::detached);
  while (!f.ended && ioc.run_one_for(40s) > 0) {
  }
  return f;
}

}  // namespace

TEST_CASE("the real engine's event stream reports our container's start and death with its exit code",
          "[docker][events]") {
  if (!test::docker_tests_enabled()) return;
  auto engine = real_engine();
  auto present = run(engine.image_exists(test::base_image));
  REQUIRE(present.ok());
  if (!*present) FAIL("image " << test::base_image << " is missing: build it with scripts/setup");
  auto token = test::unique_token();
  test::container_sweeper sweep(token);
  auto id = run(engine.create_container(watched_sleeper(token)));
  REQUIRE(id.ok());

  event_subscription sub;
  sub.container_labels = {std::string(test::test_label) + "=" + token};
  sub.container_actions = {"start", "die", "destroy"};
  std::chrono::steady_clock::time_point killed_at;
  auto died = [](const following& f) {
    return std::any_of(f.seen.begin(), f.seen.end(), [](const engine_event& e) { return e.action == "die"; });
  };
  auto f = follow_until(engine, sub, died, [&]() -> asio::awaitable<void> {
    auto started = co_await engine.start_container(*id);
    CHECK(started.ok());
    co_await sleep_for(200ms);
    auto killed = test::run_command({"docker", "kill", "--signal", "KILL", *id});
    killed_at = std::chrono::steady_clock::now();
    CHECK(killed.exit_code == 0);
  });
  REQUIRE(f.opened);
  REQUIRE(f.ended.has_value());
  CHECK_FALSE(f.ended->ok());  // cancelled: an error, as every end of the stream is
  REQUIRE(f.seen.size() == 2);
  CHECK(f.seen[0].action == "start");
  const auto& die = f.seen[1];
  CHECK(die.type == "container");
  CHECK(die.action == "die");
  CHECK(die.container_id == *id);
  CHECK(die.exit_code == 137);
  CHECK(die.attributes.at(test::test_label) == token);
  CHECK(die.time_nano > f.seen[0].time_nano);
  auto latency = std::chrono::duration_cast<std::chrono::milliseconds>(f.last_event_at - killed_at);
  WARN("die reached the follower " << latency.count() << " ms after `docker kill` returned");

  // `since` replays: a new stream from the die's time sees it again (and the removal after it).
  REQUIRE(run(engine.remove_container(*id)).ok());
  sub.since_nano = die.time_nano;
  auto destroyed = [](const following& g) {
    return std::any_of(g.seen.begin(), g.seen.end(), [](const engine_event& e) { return e.action == "destroy"; });
  };
  auto replay = follow_until(engine, sub, destroyed, []() -> asio::awaitable<void> { co_return; });
  REQUIRE(replay.seen.size() >= 2);
  CHECK(replay.seen.front().action == "die");
  CHECK(replay.seen.front().time_nano == die.time_nano);
  CHECK(replay.seen.back().action == "destroy");
}
