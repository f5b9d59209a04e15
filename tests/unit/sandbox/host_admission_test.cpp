// Host memory admission over the fakes with a faked host: the memory limits of every
// organization's sandboxes that hold memory stay within (MemTotal − reserve) × over-commit;
// creates and starts past it are refused with host_full before anything is made, in the
// organization's audit chain; stopped and deleted sandboxes make room; parallel creates and
// starts cannot overshoot. (The warm pool's side is in pool_test.cpp.)

#include <boost/asio/detached.hpp>
#include <catch2/catch.hpp>
#include <fstream>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

// Room for `sandboxes` of the fixture's default 768 MiB, and half of one more.
void size_host(fixture& f, int sandboxes) {
  f.cfg.host.memory_reserve_mb = 1000;
  f.cfg.host.memory_overcommit = 1.0;
  f.host.mb = 1000 + sandboxes * 768 + 384;
}

std::size_t host_full_events(fixture& f, const std::string& org_id) {
  store::audit_filter filter;
  filter.action = "guardrail.host_full";
  filter.limit = 1000;
  auto list = store::audit_store(*f.db).list_audit_events(org_id, filter);
  REQUIRE(list);
  return list->size();
}

std::size_t live_rows(fixture& f, const std::string& org_id) {
  auto rows = store::sandbox_store(*f.db).list_live_sandboxes(org_id);
  REQUIRE(rows);
  return rows->size();
}

}  // namespace

TEST_CASE("host memory: MemTotal is read from /proc/meminfo's text, in MiB", "[sandbox][host]") {
  auto total = parse_mem_total_mb("MemTotal:       24117440 kB\nMemFree:         1000 kB\n");
  REQUIRE(total);
  CHECK(*total == 23552);
  CHECK(parse_mem_total_mb("MemFree: 1 kB\nMemTotal: 2048 kB").value() == 2);
  CHECK_FALSE(parse_mem_total_mb("MemFree: 1 kB\n"));
  CHECK_FALSE(parse_mem_total_mb("MemTotal: 2048 MB\n"));
  CHECK_FALSE(parse_mem_total_mb("MemTotal: -5 kB\n"));
  CHECK_FALSE(parse_mem_total_mb("MemTotal: lots kB\n"));

  sandfort::testing::temp_dir dir;
  std::ofstream(dir.file("meminfo")) << "MemTotal:        4194304 kB\n";
  proc_meminfo from_file(dir.file("meminfo"));
  CHECK(from_file.total_mb().value() == 4096);
  CHECK_FALSE(proc_meminfo(dir.file("absent")).total_mb());
  CHECK(proc_meminfo().total_mb().value() > 0);  // this host's own

  host_config h;
  h.memory_reserve_mb = 2048;
  h.memory_overcommit = 1.0;
  CHECK(sandbox_memory_capacity_mb(23552, h) == 21504);
  h.memory_overcommit = 1.5;
  CHECK(sandbox_memory_capacity_mb(23552, h) == 32256);
  CHECK(sandbox_memory_capacity_mb(1000, h) == 0);  // the reserve is more than the host has
}

TEST_CASE("host memory: a create the host cannot hold is refused with host_full, for every organization",
          "[sandbox][host]") {
  fixture f;  // default resources: 768 MiB; organization quotas far above the host
  size_host(f, 2);
  auto a = f.create_started();
  f.create_started();
  const auto containers = f.engine.created.size();

  auto refused = f.create(f.org_a.id, {});
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::host_full);
  CHECK_THAT(refused.err().message, Catch::Contains("host full") && Catch::Contains("768 MiB"));
  // The tenant's answer gives the host's capacity, not the other tenants' use.
  CHECK_THAT(refused.err().message, Catch::Contains(std::to_string(2 * 768 + 384)));
  // The host is full for everyone: the point is the host, not fairness between tenants.
  auto other = f.create(f.org_b.id, {});
  REQUIRE_FALSE(other);
  CHECK(other.err().code == errc::host_full);
  // Refused before anything was made: no row, no container.
  CHECK(live_rows(f, f.org_a.id) == 2);
  CHECK(live_rows(f, f.org_b.id) == 0);
  CHECK(f.engine.created.size() == containers);
  CHECK(host_full_events(f, f.org_a.id) == 1);
  CHECK(host_full_events(f, f.org_b.id) == 1);

  // A smaller sandbox still fits in what is left.
  create_request small;
  small.memory_mb = 256;
  small.wait = true;
  auto fits = f.create(f.org_b.id, small);
  REQUIRE(fits);
  // Deleting makes room.
  REQUIRE(f.run(f.svc->remove(f.org_a.id, a.id)));
  CHECK(f.create(f.org_b.id, {}));
}

TEST_CASE("host memory: stopped sandboxes hold none, paused ones do, and a start is checked again",
          "[sandbox][host]") {
  fixture f;
  size_host(f, 2);
  auto a = f.create_started();
  auto b = f.create_started();
  REQUIRE(f.run(f.svc->pause(f.org_a.id, b.id)));
  CHECK(f.create(f.org_b.id, {}).err().code == errc::host_full);  // paused keeps its memory

  REQUIRE(f.run(f.svc->stop(f.org_a.id, a.id)));
  auto c = f.create(f.org_b.id, {});  // a's memory is free while it is stopped ...
  REQUIRE(c);
  auto restart = f.run(f.svc->start(f.org_a.id, a.id));  // ... so it cannot start again now
  REQUIRE_FALSE(restart);
  CHECK(restart.err().code == errc::host_full);
  CHECK(store::sandbox_store(*f.db).get_sandbox(f.org_a.id, a.id)->state == "stopped");
  CHECK(host_full_events(f, f.org_a.id) == 1);

  REQUIRE(f.run(f.svc->remove(f.org_b.id, c->id)));
  auto started = f.run(f.svc->start(f.org_a.id, a.id));
  REQUIRE(started);
  CHECK(started->state == "started");
}

TEST_CASE("host memory: the over-commit ratio lets limits add up to more than the host has", "[sandbox][host]") {
  fixture f;
  size_host(f, 2);  // 1920 MiB for sandboxes at 1.0
  f.cfg.host.memory_overcommit = 2.0;  // 3840: five of 768
  for (int i = 0; i < 5; ++i) f.create_started();
  CHECK(f.create(f.org_a.id, {}).err().code == errc::host_full);
}

TEST_CASE("host memory: parallel creates and starts cannot overshoot the host", "[sandbox][host]") {
  fixture f;
  size_host(f, 2);
  int ok = 0, full = 0, other = 0;
  auto one = [&](const std::string& org_id) -> asio::awaitable<void> {
    create_request req;
    req.wait = true;
    auto r = co_await f.svc->create(org_id, req);
    if (r) ++ok;
    else if (r.err().code == errc::host_full) ++full;
    else ++other;
  };
  for (int i = 0; i < 6; ++i) asio::co_spawn(f.ioc, one(i % 2 ? f.org_a.id : f.org_b.id), asio::detached);
  f.ioc.restart();
  f.ioc.run_for(5s);
  CHECK(ok == 2);
  CHECK(full == 4);
  CHECK(other == 0);

  // Both stopped, then started at once with room for one: the second start sees the first.
  auto rows = store::sandbox_store(*f.db).list_live_sandboxes_all_orgs();
  REQUIRE(rows);
  REQUIRE(rows->size() == 2);
  for (auto& r : *rows) REQUIRE(f.run(f.svc->stop(r.org_id, r.id)));
  f.host.mb -= 768;  // room for one now
  int started = 0, refused = 0;
  for (auto& r : *rows)
    asio::co_spawn(f.ioc, [&, r]() -> asio::awaitable<void> {
      auto s = co_await f.svc->start(r.org_id, r.id);
      if (s) ++started;
      else if (s.err().code == errc::host_full) ++refused;
    }, asio::detached);
  f.ioc.restart();
  f.ioc.run_for(5s);
  CHECK(started == 1);
  CHECK(refused == 1);
}

TEST_CASE("host memory: a host whose memory cannot be read admits nothing", "[sandbox][host]") {
  fixture f;
  f.host.readable = false;
  auto refused = f.create(f.org_a.id, {});
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::unavailable);
  CHECK(live_rows(f, f.org_a.id) == 0);
  CHECK(f.engine.created.empty());
}
