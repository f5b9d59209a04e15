// Guardrails over the fakes: quotas, image policy, the kill switch, and the reaper (TTL and idle
// stops, deletion after the grace period), each decision in the audit chain.

#include <catch2/catch.hpp>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

std::vector<store::audit_event> events(fixture& f, const std::string& org_id, const std::string& action) {
  store::audit_filter filter;
  filter.action = action;
  filter.limit = 1000;
  auto list = f.db->list_audit_events(org_id, filter);
  REQUIRE(list);
  return *list;
}

}  // namespace

TEST_CASE("guardrails: an organization over its sandbox quota gets quota_exceeded naming the use", "[sandbox][guardrails]") {
  fixture f;
  f.cfg.guardrails.max_sandboxes = 2;
  f.create_started();
  auto second = f.create_started();
  auto refused = f.run(f.svc->create(f.org_a.id, {}));
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::quota_exceeded);
  CHECK_THAT(refused.err().message, Catch::Contains("sandboxes") && Catch::Contains("2 of 2"));
  CHECK(f.run(f.svc->create(f.org_b.id, {})));  // another organization is not affected
  auto recorded = events(f, f.org_a.id, "guardrail.quota_exceeded");
  REQUIRE(recorded.size() == 1);
  CHECK(recorded[0].outcome == "denied");

  // Stopped sandboxes count; deleted ones do not.
  REQUIRE(f.run(f.svc->stop(f.org_a.id, second.id)));
  CHECK_FALSE(f.run(f.svc->create(f.org_a.id, {})));
  REQUIRE(f.run(f.svc->remove(f.org_a.id, second.id)));
  CHECK(f.run(f.svc->create(f.org_a.id, {})));
}

TEST_CASE("guardrails: CPU and memory quotas count running sandboxes, also when one is started again", "[sandbox][guardrails]") {
  fixture f;  // default resources: 1.5 CPUs, 768 MB
  f.cfg.guardrails.max_cpus = 3;
  f.cfg.guardrails.max_memory_mb = 100000;
  auto a = f.create_started();
  f.create_started();
  auto refused = f.run(f.svc->create(f.org_a.id, {}));
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.err().message, Catch::Contains("cpus") && Catch::Contains("3 of 3"));
  REQUIRE(f.run(f.svc->stop(f.org_a.id, a.id)));
  auto c = f.create_started();  // a's CPUs are free while it is stopped ...
  auto restart = f.run(f.svc->start(f.org_a.id, a.id));  // ... so it cannot start again now
  REQUIRE_FALSE(restart);
  CHECK(restart.err().code == errc::quota_exceeded);

  f.cfg.guardrails.max_cpus = 100;
  f.cfg.guardrails.max_memory_mb = 1000;  // 768 in use: 768 more do not fit
  REQUIRE(f.run(f.svc->remove(f.org_a.id, c.id)));
  auto memory = f.run(f.svc->start(f.org_a.id, a.id));
  REQUIRE_FALSE(memory);
  CHECK_THAT(memory.err().message, Catch::Contains("memory_mb") && Catch::Contains("768 of 1000"));
}

TEST_CASE("guardrails: an organization's own limits override the defaults; null goes back", "[sandbox][guardrails]") {
  fixture f;
  f.cfg.guardrails.max_sandboxes = 1;
  limits_update u;
  u.max_sandboxes = std::optional<std::int64_t>(3);
  u.allowed_images = std::optional<std::vector<std::string>>(std::vector<std::string>{"sandfort/*", "python:3.12-*"});
  auto set = f.svc->set_limits(f.org_a.id, u, audit::system_actor());
  REQUIRE(set);
  CHECK(set->limits.max_sandboxes == 3);
  CHECK(set->own_fields == std::vector<std::string>{"max_sandboxes", "allowed_images"});
  f.create_started();
  f.create_started();
  CHECK(f.svc->guardrails(f.org_a.id)->usage.sandboxes == 2);
  CHECK(f.svc->guardrails(f.org_b.id)->limits.max_sandboxes == 1);  // others keep the default
  REQUIRE(events(f, f.org_a.id, "org.limits").size() == 1);

  limits_update back;
  back.max_sandboxes = std::optional<std::int64_t>();
  auto reset = f.svc->set_limits(f.org_a.id, back, audit::system_actor());
  REQUIRE(reset);
  CHECK(reset->limits.max_sandboxes == 1);
  CHECK(reset->limits.allowed_images.size() == 2);  // unchanged: not in the update

  limits_update bad;
  bad.allowed_images = std::optional<std::vector<std::string>>(std::vector<std::string>{"has space"});
  CHECK(f.svc->set_limits(f.org_a.id, bad, audit::system_actor()).err().code == errc::invalid_argument);
}

TEST_CASE("guardrails: images outside the organization's patterns are refused with image_not_allowed", "[sandbox][guardrails]") {
  fixture f;
  limits_update u;
  u.allowed_images = std::optional<std::vector<std::string>>(std::vector<std::string>{"sandfort/*", "python:3.12*"});
  REQUIRE(f.svc->set_limits(f.org_a.id, u, audit::system_actor()));
  create_request python;
  python.snapshot = "python:3.12-slim";
  CHECK(f.run(f.svc->create(f.org_a.id, python)));
  CHECK(f.run(f.svc->create(f.org_a.id, {})));  // the default image, sandfort/base:bookworm
  for (const char* image : {"python:3.11", "docker.io/library/python:3.12", "evil/sandfort/x", "node:20"}) {
    create_request other;
    other.snapshot = image;
    auto refused = f.run(f.svc->create(f.org_a.id, other));
    INFO(image);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().code == errc::image_not_allowed);
  }
  CHECK(events(f, f.org_a.id, "guardrail.image_not_allowed").size() == 4);
  create_request node;
  node.snapshot = "node:20";
  CHECK(f.run(f.svc->create(f.org_b.id, node)));  // the default policy: any image
}

TEST_CASE("guardrails: the kill switch stops every running sandbox and refuses new ones until lifted", "[sandbox][guardrails]") {
  fixture f;
  auto a = f.create_started();
  auto b = f.create_started();
  auto other = f.run(f.svc->create(f.org_b.id, {}));
  auto report = f.run(f.svc->stop_all(f.org_a.id, true, audit::system_actor()));
  REQUIRE(report);
  CHECK(report->stopped.size() == 2);
  CHECK(f.get(f.org_a.id, a.id)->state == "stopped");
  CHECK(f.get(f.org_a.id, b.id)->state == "stopped");
  CHECK(f.get(f.org_b.id, other->id)->state == "started");

  CHECK(f.run(f.svc->create(f.org_a.id, {})).err().code == errc::conflict);
  CHECK(f.run(f.svc->start(f.org_a.id, a.id)).err().code == errc::conflict);
  CHECK(f.run(f.svc->create(f.org_b.id, {})));
  // Set by the operator: the organization's admin cannot lift it.
  CHECK(f.svc->lift_stop(f.org_a.id, false, audit::system_actor()).err().code == errc::permission_denied);
  REQUIRE(f.svc->lift_stop(f.org_a.id, true, audit::system_actor()));
  CHECK(f.run(f.svc->start(f.org_a.id, a.id)));
  CHECK(events(f, f.org_a.id, "org.stop_all").size() == 1);
  CHECK(events(f, f.org_a.id, "org.stop_all_lifted").size() == 1);
  CHECK(events(f, f.org_a.id, "guardrail.org_stopped").size() == 2);
}

TEST_CASE("guardrails: TTL stops, then deletes after the grace period", "[sandbox][guardrails][reaper]") {
  fixture f;
  f.cfg.guardrails.delete_grace_s = 600;
  create_request short_ttl;
  short_ttl.ttl_s = 60;
  auto a = f.create_started(short_ttl);
  create_request long_ttl;
  long_ttl.ttl_s = 3600;
  auto b = f.create_started(long_ttl);
  CHECK(f.run(f.svc->reap()) == 0);

  f.clk.t += std::chrono::seconds(61);
  CHECK(f.run(f.svc->reap()) == 1);
  auto stopped = f.get(f.org_a.id, a.id);
  REQUIRE(stopped);
  CHECK(stopped->state == "stopped");
  CHECK_THAT(stopped->error_message, Catch::Contains("TTL reached"));
  CHECK(f.get(f.org_a.id, b.id)->state == "started");

  f.clk.t += std::chrono::seconds(600);
  CHECK(f.run(f.svc->reap()) >= 1);
  CHECK(f.get(f.org_a.id, a.id).err().code == errc::not_found);
  CHECK_FALSE(f.engine.of_sandbox(a.id));
  CHECK(f.engine.of_sandbox(b.id));
}

TEST_CASE("guardrails: an idle sandbox is stopped; used ones are not; started again it is kept", "[sandbox][guardrails][reaper]") {
  fixture f;
  f.cfg.guardrails.delete_grace_s = 100;
  create_request idle;
  idle.idle_timeout_s = 30;
  auto a = f.create_started(idle);
  auto b = f.create_started(idle);
  create_request never;
  never.idle_timeout_s = 0;
  auto c = f.create_started(never);
  CHECK(f.run(f.svc->reap()) == 0);  // first look: counts from now

  f.clk.t += std::chrono::seconds(20);
  f.svc->activity().touch(b.id);  // b is used
  {
    auto busy = f.svc->activity().busy(c.id);  // held: never idle while held
  }
  f.clk.t += std::chrono::seconds(15);
  CHECK(f.run(f.svc->reap()) == 1);
  CHECK(f.get(f.org_a.id, a.id)->state == "stopped");
  CHECK_THAT(f.get(f.org_a.id, a.id)->error_message, Catch::Contains("idle for 35 s"));
  CHECK(f.get(f.org_a.id, b.id)->state == "started");
  CHECK(f.get(f.org_a.id, c.id)->state == "started");
  auto stop_events = events(f, f.org_a.id, "sandbox.stop");
  REQUIRE(stop_events.size() == 1);
  CHECK(stop_events[0].actor == "system");
  CHECK_THAT(stop_events[0].details, Catch::Contains("delete_after"));

  // b goes idle too, is stopped, and is started again within the grace: kept.
  f.clk.t += std::chrono::seconds(30);
  CHECK(f.run(f.svc->reap()) == 1);
  REQUIRE(f.get(f.org_a.id, b.id)->state == "stopped");
  REQUIRE(f.run(f.svc->start(f.org_a.id, b.id)));
  f.clk.t += std::chrono::seconds(101);  // a's grace is over; b was started again
  f.run(f.svc->reap());
  CHECK(f.get(f.org_a.id, a.id).err().code == errc::not_found);
  CHECK(f.get(f.org_a.id, b.id));
  CHECK(f.get(f.org_a.id, c.id)->state == "started");
}
