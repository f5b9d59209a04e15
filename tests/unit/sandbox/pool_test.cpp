// The warm pool over the fakes: members made up to the target (which grows with a burst, members
// made a few at once), matching creates claim one with
// the caller's environment and proxy credential (and a fresh one after a restart), others are
// made cold; a member that will not take the claim is removed and the create made cold; a lost
// member is replaced; drain removes the waiting ones. Pool state never reaches an organization.

#include <catch2/catch.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>

#include "sandfort/crypto/digest.hpp"

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;
using namespace std::chrono_literals;

namespace {

// The pool's filler never runs out of work to wait for, so fixture::run (which runs until the
// io_context is idle) would always hit its limit: these step the loop until the work is done.
template <typename T>
T settle(fixture& f, asio::awaitable<T> work) {
  std::optional<T> out;
  asio::co_spawn(f.ioc, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(work)); }, asio::detached);
  f.ioc.restart();
  for (int i = 0; i < 500 && !out; ++i) f.ioc.run_for(5ms);
  REQUIRE(out);
  return std::move(*out);
}

void wait_ready(fixture& f, int ready) {
  f.ioc.restart();
  for (int i = 0; i < 500; ++i) {
    if (f.svc->pools().at(0).ready == ready && f.svc->pools().at(0).making == 0) return;
    f.ioc.run_for(5ms);
  }
  FAIL("the pool did not reach " << ready << " ready members: " << f.svc->pools().at(0).ready);
}

// A service over the fixture's fakes whose configuration has one pool of `size` (growing up to
// `max_size`), once `ready` (default: all of them) are made.
void with_pool(fixture& f, int size, int ready = -1, int max_size = -1) {
  f.cfg.pools = {pool_config{f.cfg.default_image, f.cfg.default_resources, size, max_size}};
  f.svc = std::make_unique<service>(f.ioc.get_executor(), f.cfg, *f.db, f.engine, f.agent, f.clk, *f.events, &f.host);
  REQUIRE(f.run(f.svc->network().prepare()));
  REQUIRE(f.run(f.svc->reconciliation().reconcile()));
  f.svc->start_pool();
  wait_ready(f, ready < 0 ? size : ready);
}

std::size_t unclaimed_members(fixture& f) {
  std::size_t n = 0;
  for (auto& [id, c] : f.engine.containers)
    if (c.labels.count(label_pool) && !store::sandbox_store(*f.db).find_live_sandbox(c.labels[label_sandbox])) ++n;
  return n;
}

}  // namespace

TEST_CASE("pool: members are made up to the target, with no organization and no environment", "[sandbox][pool]") {
  fixture f;
  with_pool(f, 2);
  CHECK(unclaimed_members(f) == 2);
  for (const auto& spec : f.engine.created) {
    CHECK(spec.env.empty());
    CHECK(spec.labels.at(label_org).empty());
    CHECK(spec.labels.at(label_pool) == "1");
  }
  // Not a row anywhere: no organization lists or counts them.
  auto listed = f.run(f.svc->list(f.org_a.id, {}));
  REQUIRE(listed);
  CHECK(listed->items.empty());
}

TEST_CASE("pool: a matching create claims a member with the caller's environment", "[sandbox][pool]") {
  fixture f;
  with_pool(f, 1);
  auto member_container = f.engine.containers.begin()->second;
  create_request req;
  req.env = {{"GREETING", "hi"}, {"HTTP_PROXY", "http://elsewhere:1"}};
  req.workdir = "/work/app";
  req.labels = {{"team", "a"}};
  auto v = settle(f, f.svc->create(f.org_a.id, req));
  REQUIRE(v);
  CHECK(v->state == "started");  // at once, though the caller did not ask to wait
  CHECK(v->id == member_container.labels.at(label_sandbox));
  auto row = store::sandbox_store(*f.db).get_sandbox(f.org_a.id, v->id);
  REQUIRE(row);
  CHECK(row->container_id == member_container.id);
  CHECK(spec_from_json(row->spec_json).pooled);

  REQUIRE(f.agent.claims.size() == 1);
  const auto& claim = f.agent.claims[0];
  CHECK(claim.sandbox_id == v->id);
  CHECK(claim.workdir == "/work/app");
  CHECK(claim.env.at("GREETING") == "hi");
  // The proxy's settings win over the caller's, with this sandbox's own credential.
  const auto& proxy = claim.env.at("HTTP_PROXY");
  CHECK(proxy.starts_with("http://" + v->id + ":"));
  auto secret = proxy.substr(proxy.find(':', 7) + 1, 48);
  CHECK(row->proxy_secret_sha256 == sha256_hex(secret));

  // The pool refills with a new member (a new id).
  wait_ready(f, 1);
  CHECK(f.svc->pools().at(0).claims == 1);
  CHECK(unclaimed_members(f) == 1);
}

TEST_CASE("pool: creates it cannot serve are made cold", "[sandbox][pool]") {
  fixture f;
  with_pool(f, 1);
  create_request other_class;
  other_class.cpus = 0.5;
  other_class.wait = true;
  auto a = settle(f, f.svc->create(f.org_a.id, other_class));
  REQUIRE(a);
  create_request as_user;
  as_user.user = "1000";
  as_user.wait = true;
  auto b = settle(f, f.svc->create(f.org_a.id, as_user));
  REQUIRE(b);
  // A gVisor create gets a gVisor container of its own, never the pool's runc member.
  create_request gvisor;
  gvisor.runtime = "gvisor";
  gvisor.wait = true;
  auto c = settle(f, f.svc->create(f.org_a.id, gvisor));
  REQUIRE(c);
  CHECK(c->spec.runtime == "gvisor");
  CHECK(f.engine.created.back().runtime == "runsc");
  CHECK(f.engine.created.back().network_mode == "none");
  CHECK(f.agent.claims.empty());
  CHECK(f.svc->pools().at(0).ready == 1);
  CHECK_FALSE(spec_from_json(store::sandbox_store(*f.db).get_sandbox(f.org_a.id, a->id)->spec_json).pooled);
}

TEST_CASE("pool: an organization required to run gVisor is never handed a member", "[sandbox][pool][runtimes]") {
  fixture f;
  with_pool(f, 1);
  limits_update u;
  u.allowed_runtimes = std::optional<std::vector<std::string>>(std::vector<std::string>{"gvisor"});
  REQUIRE(f.svc->admission().set_limits(f.org_a.id, u, audit::system_actor()));
  const auto containers = f.engine.created.size();
  // A create the pool matches in every other way: made cold on gVisor, the member left waiting.
  create_request plain;
  plain.wait = true;
  auto v = settle(f, f.svc->create(f.org_a.id, plain));
  REQUIRE(v);
  CHECK(v->spec.runtime == "gvisor");
  CHECK_FALSE(spec_from_json(store::sandbox_store(*f.db).get_sandbox(f.org_a.id, v->id)->spec_json).pooled);
  REQUIRE(f.engine.created.size() == containers + 1);
  CHECK(f.engine.created.back().runtime == "runsc");
  CHECK(f.agent.claims.empty());
  // Asking for runc is refused before the pool is asked: no claim, no miss, nothing made.
  create_request runc = plain;
  runc.runtime = "runc";
  CHECK(settle(f, f.svc->create(f.org_a.id, runc)).err().code == errc::runtime_not_allowed);
  CHECK(f.engine.created.size() == containers + 1);
  CHECK(f.svc->pools().at(0).ready == 1);
  CHECK(f.svc->pools().at(0).claims == 0);
  CHECK(f.svc->pools().at(0).misses == 0);
  // Another organization still gets the member.
  auto other = settle(f, f.svc->create(f.org_b.id, plain));
  REQUIRE(other);
  CHECK(spec_from_json(store::sandbox_store(*f.db).get_sandbox(f.org_b.id, other->id)->spec_json).pooled);
}

TEST_CASE("pool: a member that refuses the claim is removed and the create made cold", "[sandbox][pool]") {
  fixture f;
  with_pool(f, 1);
  auto member_id = f.engine.containers.begin()->first;
  f.agent.claim_answer = make_error(errc::unavailable, "the member is gone (fake)");
  create_request req;
  req.wait = true;
  auto v = settle(f, f.svc->create(f.org_a.id, req));
  REQUIRE(v);
  CHECK(v->state == "started");
  CHECK(std::find(f.engine.removed.begin(), f.engine.removed.end(), member_id) != f.engine.removed.end());
  auto row = store::sandbox_store(*f.db).get_sandbox(f.org_a.id, v->id);
  REQUIRE(row);
  CHECK(row->container_id != member_id);
  CHECK_FALSE(spec_from_json(row->spec_json).pooled);
  // Cold: the environment is in the container's own configuration.
  auto* c = f.engine.of_sandbox(v->id);
  REQUIRE(c);
  bool has_proxy = false;
  for (const auto& spec : f.engine.created)
    if (spec.labels.at(label_sandbox) == v->id && !spec.labels.count(label_pool))
      for (const auto& kv : spec.env) has_proxy = has_proxy || kv.starts_with("HTTP_PROXY=http://" + v->id + ":");
  CHECK(has_proxy);
}

TEST_CASE("pool: a pooled sandbox is claimed again, with a new credential, at each start", "[sandbox][pool]") {
  fixture f;
  with_pool(f, 1);
  create_request req;
  req.env = {{"KEEP", "1"}};
  auto v = settle(f, f.svc->create(f.org_a.id, req));
  REQUIRE(v);
  auto first_hash = store::sandbox_store(*f.db).get_sandbox(f.org_a.id, v->id)->proxy_secret_sha256;
  REQUIRE(settle(f, f.svc->stop(f.org_a.id, v->id)));
  auto started = settle(f, f.svc->start(f.org_a.id, v->id));
  REQUIRE(started);
  REQUIRE(f.agent.claims.size() == 2);
  CHECK(f.agent.claims[1].env.at("KEEP") == "1");
  // No workdir asked for: the default, at every claim (docs/images.md).
  CHECK(f.agent.claims[0].workdir == "/work");
  CHECK(f.agent.claims[1].workdir == "/work");
  auto row = store::sandbox_store(*f.db).get_sandbox(f.org_a.id, v->id);
  CHECK(row->proxy_secret_sha256 != first_hash);
  const auto& proxy = f.agent.claims[1].env.at("HTTP_PROXY");
  CHECK(row->proxy_secret_sha256 == sha256_hex(proxy.substr(proxy.find(':', 7) + 1, 48)));
}

TEST_CASE("pool: a lost member is replaced, and drain removes the waiting ones", "[sandbox][pool]") {
  fixture f;
  with_pool(f, 2);
  auto before = f.engine.created.size();
  asio::cancellation_signal stop_following;
  asio::co_spawn(f.ioc, f.svc->reconciliation().follow_container_events(), asio::bind_cancellation_slot(stop_following.slot(), asio::detached));
  f.ioc.restart();
  f.ioc.run_for(30ms);  // the follower subscribes
  auto dead = f.engine.containers.begin()->second;
  f.engine.containers.begin()->second.running = false;
  f.engine.emit(f.engine.container_event(dead, "die"));
  f.ioc.restart();
  f.ioc.run_for(30ms);
  CHECK(std::find(f.engine.removed.begin(), f.engine.removed.end(), dead.id) != f.engine.removed.end());
  wait_ready(f, 2);
  CHECK(f.engine.created.size() == before + 1);
  stop_following.emit(asio::cancellation_type::terminal);

  settle(f, [&]() -> asio::awaitable<int> {
    co_await f.svc->drain_pool();
    co_return 0;
  }());
  CHECK(unclaimed_members(f) == 0);
  CHECK(f.svc->pools().at(0).ready == 0);
  // Drained: creates are made cold from now on.
  create_request req;
  req.wait = true;
  auto v = settle(f, f.svc->create(f.org_a.id, req));
  REQUIRE(v);
  CHECK(f.agent.claims.empty());
}

TEST_CASE("pool: members hold host memory: the pool fills what the host can hold, and gives way to creates",
          "[sandbox][pool][host]") {
  fixture f;  // default resources: 768 MiB
  f.cfg.host.memory_reserve_mb = 0;
  f.host.mb = 2 * 768 + 100;
  with_pool(f, 3, 2);
  f.ioc.restart();
  f.ioc.run_for(50ms);
  CHECK(f.svc->pools().at(0).ready == 2);  // not 3: the third would not fit
  CHECK_THAT(f.svc->pools().at(0).last_error, Catch::Contains("host full"));

  // A cold create that fits only without a waiting member: the member goes, the create is made.
  create_request cold;
  cold.memory_mb = 512;
  cold.wait = true;
  const auto removed = f.engine.removed.size();
  auto made = settle(f, f.svc->create(f.org_a.id, cold));
  REQUIRE(made);
  CHECK(f.svc->pools().at(0).ready == 1);
  CHECK(f.engine.removed.size() == removed + 1);
  // A matching create takes the last member: its memory moves from the pool to the sandbox.
  create_request warm;
  warm.wait = true;
  auto claimed = settle(f, f.svc->create(f.org_a.id, warm));
  REQUIRE(claimed);
  CHECK(f.svc->pools().at(0).claims == 1);
  // Nothing left to give way: refused, and the pool does not refill past the host either.
  auto refused = settle(f, f.svc->create(f.org_b.id, cold));
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::host_full);
  f.ioc.restart();
  f.ioc.run_for(50ms);
  CHECK(f.svc->pools().at(0).ready == 0);
  CHECK(unclaimed_members(f) == 0);
}

TEST_CASE("pool: a burst grows the target, members are made pool.max_parallel at once, the next burst is served",
          "[sandbox][pool]") {
  fixture f;
  f.engine.start_delay = 20ms;  // a member takes a while to make, so that makers overlap
  f.cfg.pool.max_parallel = 2;
  with_pool(f, 0, 0, 6);
  create_request req;
  req.wait = true;
  for (int i = 0; i < 5; ++i) REQUIRE(settle(f, f.svc->create(f.org_a.id, req)));
  auto p = f.svc->pools().at(0);
  CHECK(p.target == 5);
  CHECK(p.claims + p.misses == 5);
  CHECK(p.misses >= 1);  // the first found it empty
  CHECK_THAT(p.reason, Catch::StartsWith("a burst of 5 matching creates within 60 s"));
  REQUIRE(p.last_burst);
  CHECK(p.last_burst->creates == 5);

  // Refilled to the target, never more than two members being made at once, and two at times.
  int most_making = 0;
  f.ioc.restart();
  for (int i = 0; i < 2000 && !(f.svc->pools().at(0).ready == 5 && f.svc->pools().at(0).making == 0); ++i) {
    most_making = std::max(most_making, f.svc->pools().at(0).making);
    f.ioc.run_for(1ms);
  }
  CHECK(f.svc->pools().at(0).ready == 5);
  CHECK(most_making == 2);

  // The second burst of the same size is served from the pool, every create of it.
  const auto before = f.svc->pools().at(0);
  for (int i = 0; i < 5; ++i) {
    auto v = settle(f, f.svc->create(f.org_b.id, req));
    REQUIRE(v);
    CHECK(spec_from_json(store::sandbox_store(*f.db).get_sandbox(f.org_b.id, v->id)->spec_json).pooled);
  }
  CHECK(f.svc->pools().at(0).claims == before.claims + 5);
  CHECK(f.svc->pools().at(0).misses == before.misses);
  CHECK(f.svc->pools().at(0).target == 6);  // ten within the window: bounded by max_size
  CHECK_THAT(f.svc->pools().at(0).reason, Catch::StartsWith("max_size 6: a burst of 10"));
}

TEST_CASE("pool: members being made hold host memory too: parallel makers never overrun the host",
          "[sandbox][pool][host]") {
  fixture f;  // default resources: 768 MiB
  f.cfg.host.memory_reserve_mb = 0;
  f.host.mb = 2 * 768 + 100;  // room for two members
  f.cfg.pool.max_parallel = 3;
  f.engine.start_delay = 20ms;  // the makers overlap
  with_pool(f, 3, 2);
  f.ioc.restart();
  f.ioc.run_for(100ms);
  // Three makers were free, but the third found the first two counted: never made, not even begun.
  CHECK(f.svc->pools().at(0).ready == 2);
  CHECK(f.engine.created.size() == 2);
}
