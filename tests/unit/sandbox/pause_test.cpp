// Pause and resume over the fakes: the state rules, the audit chain, calls refused while frozen,
// stop and delete of a paused sandbox, the guardrails, the event follower and a restart.

#include <catch2/catch.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

std::vector<audit::event_record> events(fixture& f, const std::string& action) {
  store::audit_filter filter;
  filter.action = action;
  filter.limit = 1000;
  auto list = store::audit_store(*f.db).list_audit_events(f.org_a.id, filter);
  REQUIRE(list);
  return *list;
}

audit::actor alice() { return audit::actor{"key:alice", "req-1", "127.0.0.1"}; }

}  // namespace

TEST_CASE("pause: a started sandbox pauses and resumes, each change in the audit chain", "[sandbox][pause]") {
  fixture f;
  auto v = f.create_started();
  auto* c = f.engine.of_sandbox(v.id);
  REQUIRE(c);

  auto paused = f.run(f.svc->pause(f.org_a.id, v.id, alice()));
  REQUIRE(paused);
  CHECK(paused->state == "paused");
  CHECK(c->paused);
  CHECK(f.engine.paused_ids == std::vector<std::string>{c->id});
  CHECK(f.get(f.org_a.id, v.id)->state == "paused");
  auto noted = events(f, "sandbox.pause");
  REQUIRE(noted.size() == 1);
  CHECK(noted[0].actor == "key:alice");
  CHECK(noted[0].target == v.id);
  CHECK(nlohmann::json::parse(noted[0].details)["state"] == "paused");

  // Again: unchanged, Docker not asked twice, nothing recorded.
  auto again = f.run(f.svc->pause(f.org_a.id, v.id, alice()));
  REQUIRE(again);
  CHECK(again->state == "paused");
  CHECK(f.engine.paused_ids.size() == 1);
  CHECK(events(f, "sandbox.pause").size() == 1);

  // Calls that need it running are refused, saying what to do.
  exec_request er;
  er.command = "true";
  auto refused = f.run(f.svc->commands().exec(f.org_a.id, v.id, er));
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::conflict);
  CHECK_THAT(refused.err().message, Catch::Contains("is paused; resume it first"));
  CHECK(f.agent.execs.empty());
  // start is for stopped sandboxes: a paused one is resumed.
  CHECK(f.run(f.svc->start(f.org_a.id, v.id)).err().code == errc::conflict);

  auto resumed = f.run(f.svc->resume(f.org_a.id, v.id, alice()));
  REQUIRE(resumed);
  CHECK(resumed->state == "started");
  CHECK_FALSE(c->paused);
  CHECK(c->running);
  auto thawed = events(f, "sandbox.resume");
  REQUIRE(thawed.size() == 1);
  CHECK(thawed[0].actor == "key:alice");
  CHECK(nlohmann::json::parse(thawed[0].details)["state"] == "started");
  CHECK(f.run(f.svc->commands().exec(f.org_a.id, v.id, er)));

  auto again2 = f.run(f.svc->resume(f.org_a.id, v.id));
  REQUIRE(again2);
  CHECK(again2->state == "started");
  CHECK(f.engine.unpaused_ids.size() == 1);
}

TEST_CASE("pause: only a started sandbox pauses, only a paused one resumes", "[sandbox][pause]") {
  fixture f;
  auto v = f.create_started();
  auto resumed = f.run(f.svc->resume(f.org_a.id, v.id));  // started: unchanged
  REQUIRE(resumed);
  CHECK(resumed->state == "started");
  CHECK(f.engine.unpaused_ids.empty());

  REQUIRE(f.run(f.svc->stop(f.org_a.id, v.id)));
  auto p = f.run(f.svc->pause(f.org_a.id, v.id));
  REQUIRE_FALSE(p);
  CHECK(p.err().code == errc::conflict);
  CHECK_THAT(p.err().message, Catch::Contains("is stopped and cannot be paused"));
  auto r = f.run(f.svc->resume(f.org_a.id, v.id));
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::conflict);
  CHECK_THAT(r.err().message, Catch::Contains("is stopped and cannot be resumed"));
  CHECK(f.engine.paused_ids.empty());
  CHECK(events(f, "sandbox.pause").empty());
  CHECK(f.run(f.svc->pause(f.org_b.id, v.id)).err().code == errc::not_found);
}

TEST_CASE("pause: a paused sandbox stops and is deleted like a started one", "[sandbox][pause]") {
  fixture f;
  auto a = f.create_started();
  auto b = f.create_started();
  REQUIRE(f.run(f.svc->pause(f.org_a.id, a.id)));
  REQUIRE(f.run(f.svc->pause(f.org_a.id, b.id)));

  auto stopped = f.run(f.svc->stop(f.org_a.id, a.id));
  REQUIRE(stopped);
  CHECK(stopped->state == "stopped");
  auto* c = f.engine.of_sandbox(a.id);
  REQUIRE(c);
  CHECK_FALSE(c->running);
  // Started again, it is a fresh start, not a paused one.
  auto started = f.run(f.svc->start(f.org_a.id, a.id));
  REQUIRE(started);
  CHECK(started->state == "started");

  REQUIRE(f.run(f.svc->remove(f.org_a.id, b.id)));
  CHECK_FALSE(f.engine.of_sandbox(b.id));
  CHECK(f.get(f.org_a.id, b.id).err().code == errc::not_found);
}

TEST_CASE("pause: a paused sandbox counts for the quotas, is not idle, but its TTL and the kill switch stop it",
          "[sandbox][pause][guardrails]") {
  fixture f;  // default resources: 1.5 CPUs, 768 MB
  f.cfg.guardrails.max_cpus = 3;
  f.cfg.guardrails.max_memory_mb = 100000;
  create_request idle;
  idle.idle_timeout_s = 30;
  auto a = f.create_started(idle);
  create_request short_ttl;
  short_ttl.ttl_s = 60;
  auto b = f.create_started(short_ttl);
  REQUIRE(f.run(f.svc->pause(f.org_a.id, a.id)));
  REQUIRE(f.run(f.svc->pause(f.org_a.id, b.id)));
  CHECK(f.svc->admission().guardrails(f.org_a.id)->usage.running == 2);
  auto refused = f.run(f.svc->create(f.org_a.id, {}));  // it still holds its memory and CPUs
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::quota_exceeded);

  CHECK(f.run(f.svc->admission().reap()) == 0);
  f.clk.t += std::chrono::seconds(35);
  CHECK(f.run(f.svc->admission().reap()) == 0);  // a: idle for 35 s, but paused on purpose
  CHECK(f.get(f.org_a.id, a.id)->state == "paused");
  f.clk.t += std::chrono::seconds(30);
  CHECK(f.run(f.svc->admission().reap()) == 1);  // b: past its TTL
  auto expired = f.get(f.org_a.id, b.id);
  CHECK(expired->state == "stopped");
  CHECK_THAT(expired->error_message, Catch::Contains("TTL reached"));
  CHECK(f.get(f.org_a.id, a.id)->state == "paused");

  // Resumed, the idle timeout counts from now.
  REQUIRE(f.run(f.svc->resume(f.org_a.id, a.id)));
  CHECK(f.run(f.svc->admission().reap()) == 0);
  REQUIRE(f.run(f.svc->pause(f.org_a.id, a.id)));

  auto report = f.run(f.svc->admission().stop_all(f.org_a.id, false, audit::system_actor()));
  REQUIRE(report);
  CHECK(report->stopped == std::vector<std::string>{a.id});
  CHECK(f.get(f.org_a.id, a.id)->state == "stopped");
}

TEST_CASE("pause: a restart keeps a paused sandbox paused and follows pauses made while it was down",
          "[sandbox][pause][reconcile]") {
  fixture f;
  auto kept = f.create_started();
  auto outside = f.create_started();
  auto thawed = f.create_started();
  REQUIRE(f.run(f.svc->pause(f.org_a.id, kept.id)));
  REQUIRE(f.run(f.svc->pause(f.org_a.id, thawed.id)));
  // While sandfortd is down: `docker pause` of one, `docker unpause` of another.
  f.engine.of_sandbox(outside.id)->paused = true;
  f.engine.of_sandbox(outside.id)->status = "paused";
  f.engine.of_sandbox(thawed.id)->paused = false;
  f.engine.of_sandbox(thawed.id)->status = "running";

  service again(f.ioc.get_executor(), f.cfg, *f.db, f.engine, f.agent, f.clk, *f.events);
  REQUIRE(f.run(again.network().prepare()));
  auto report = f.run(again.reconciliation().reconcile());
  REQUIRE(report);
  CHECK(report->rows_marked_stopped == 0);
  CHECK(report->rows_marked_error == 0);
  CHECK(f.get(f.org_a.id, kept.id)->state == "paused");
  CHECK(f.get(f.org_a.id, outside.id)->state == "paused");
  CHECK(f.get(f.org_a.id, thawed.id)->state == "started");
  CHECK(f.engine.of_sandbox(kept.id)->paused);  // left as it was: frozen
  auto resumed = f.run(again.resume(f.org_a.id, kept.id));
  REQUIRE(resumed);
  CHECK(resumed->state == "started");
}

TEST_CASE("pause: the event follower keeps a paused sandbox and follows a pause made behind its back",
          "[sandbox][pause][events]") {
  fixture f;
  auto ours = f.create_started();
  auto theirs = f.create_started();
  auto dies = f.create_started();
  REQUIRE(f.run(f.svc->pause(f.org_a.id, ours.id)));
  REQUIRE(f.run(f.svc->pause(f.org_a.id, dies.id)));

  asio::cancellation_signal stop;
  bool ended = false;
  asio::co_spawn(f.ioc, f.svc->reconciliation().follow_container_events(),
                 asio::bind_cancellation_slot(stop.slot(), [&](std::exception_ptr e) {
                   ended = true;
                   if (e) std::rethrow_exception(e);
                 }));
  auto script = [&]() -> asio::awaitable<int> {
    co_await sleep_for(30ms);  // the follower subscribes
    // Our own pause's event, replayed: nothing to correct.
    f.engine.emit(f.engine.container_event(*f.engine.of_sandbox(ours.id), "pause"));
    // `docker pause` outside sandfortd.
    auto* c = f.engine.of_sandbox(theirs.id);
    c->paused = true;
    c->status = "paused";
    f.engine.emit(f.engine.container_event(*c, "pause"));
    // A paused sandbox's container that dies is stopped like a started one's.
    f.engine.kill_container(*f.engine.of_sandbox(dies.id), 137);
    co_await sleep_for(30ms);
    stop.emit(asio::cancellation_type::terminal);
    co_return 0;
  };
  f.run(script(), 10s);
  CHECK(ended);
  CHECK(f.get(f.org_a.id, ours.id)->state == "paused");
  CHECK(f.get(f.org_a.id, theirs.id)->state == "paused");
  auto died = f.get(f.org_a.id, dies.id);
  CHECK(died->state == "stopped");
  CHECK_THAT(died->error_message, Catch::Contains("exited with code 137"));
  auto by_system = events(f, "sandbox.pause");
  CHECK(std::count_if(by_system.begin(), by_system.end(),
                      [&](const auto& e) { return e.target == theirs.id && e.actor == "system"; }) == 1);
}
