// Per-key token buckets on an injected clock: bursts, refill, Retry-After, roles, and the bounds
// on memory (idle buckets dropped, a cap on their number); and the refusals counted into the
// audit chain as one event per organization and principal.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "../store/temp_dir.hpp"
#include "sandfort/api/rate_limiter.hpp"
#include "sandfort/audit/rate_limit_summary.hpp"
#include "support/manual_clock.hpp"

using namespace sandfort;
using namespace std::chrono_literals;
using sandfort::testing::manual_clock;

namespace {

rate_limits_config limits() {
  rate_limits_config c;
  c.viewer = {1, 2};
  c.member = {10, 5};
  c.admin = {100, 50};
  c.superadmin = {0, 0};
  return c;
}

int admitted(api::rate_limiter& l, const std::string& who, const rate_limit& limit, int tries) {
  int n = 0;
  for (int i = 0; i < tries; ++i) n += l.admit(who, limit).allowed ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("rate limiter: a burst passes, the next request is refused with the time until a token is back") {
  manual_clock clk;
  api::rate_limiter l(limits(), clk);
  const rate_limit member{10, 5};
  CHECK(admitted(l, "key:a", member, 5) == 5);
  auto refused = l.admit("key:a", member);
  CHECK_FALSE(refused.allowed);
  CHECK(refused.retry_after_s == 1);  // a tenth of a second, rounded up to whole seconds

  clk.advance(99ms);
  CHECK_FALSE(l.admit("key:a", member).allowed);
  clk.advance(1ms);
  CHECK(l.admit("key:a", member).allowed);  // exactly one token after 100 ms
  CHECK_FALSE(l.admit("key:a", member).allowed);

  clk.advance(10s);  // refills to the burst, not beyond
  CHECK(admitted(l, "key:a", member, 20) == 5);
}

TEST_CASE("rate limiter: Retry-After is whole seconds until one token, at least 1") {
  manual_clock clk;
  api::rate_limiter l(limits(), clk);
  const rate_limit slow{0.25, 1};  // one request per four seconds
  CHECK(l.admit("key:s", slow).allowed);
  auto d = l.admit("key:s", slow);
  CHECK_FALSE(d.allowed);
  CHECK(d.retry_after_s == 4);
  clk.advance(2500ms);
  d = l.admit("key:s", slow);
  CHECK_FALSE(d.allowed);
  CHECK(d.retry_after_s == 2);  // 1.5 s left, rounded up
  clk.advance(1500ms);
  CHECK(l.admit("key:s", slow).allowed);  // retrying when told succeeds: refusals took nothing
}

TEST_CASE("rate limiter: keys are independent, and a rate of 0 means unlimited without any state") {
  manual_clock clk;
  api::rate_limiter l(limits(), clk);
  const rate_limit viewer{1, 2};
  CHECK(admitted(l, "key:one", viewer, 10) == 2);
  CHECK(admitted(l, "key:two", viewer, 10) == 2);
  CHECK(l.size() == 2);
  CHECK(admitted(l, "key:op", rate_limit{0, 0}, 10'000) == 10'000);
  CHECK(l.size() == 2);
}

TEST_CASE("rate limiter: the bucket follows the role, the superadmin's is its own") {
  manual_clock clk;
  api::rate_limiter l(limits(), clk);
  auth::principal p;
  p.granted = auth::role::viewer;
  CHECK(l.limit_for(p).burst == 2);
  p.granted = auth::role::member;
  CHECK(l.limit_for(p).rate_per_s == 10);
  p.granted = auth::role::admin;
  CHECK(l.limit_for(p).burst == 50);
  p.superadmin = true;
  CHECK(l.limit_for(p).rate_per_s == 0);
}

TEST_CASE("rate limiter: buckets of idle keys are dropped once they would be full again") {
  manual_clock clk;
  api::rate_limiter l(limits(), clk);
  const rate_limit member{10, 5};
  for (int i = 0; i < 100; ++i) CHECK(l.admit("key:" + std::to_string(i), member).allowed);
  CHECK(l.size() == 100);
  clk.advance(99ms);  // one token used of five: full again after 100 ms
  CHECK(l.admit("key:fresh", member).allowed);
  CHECK(l.size() == 101);
  clk.advance(1ms);
  CHECK(l.admit("key:fresh", member).allowed);
  CHECK(l.size() == 1);  // only the one still in use
  // A dropped bucket comes back full: nothing was lost by forgetting it.
  CHECK(admitted(l, "key:7", member, 10) == 5);
}

TEST_CASE("rate limiter: at most max_entries buckets, the least recently used goes first") {
  manual_clock clk;
  api::rate_limiter l(limits(), clk, 3);
  const rate_limit viewer{1, 2};
  for (const char* k : {"key:a", "key:b", "key:c"}) CHECK(admitted(l, k, viewer, 2) == 2);
  CHECK_FALSE(l.admit("key:a", viewer).allowed);  // a is now the most recently used
  CHECK(l.admit("key:d", viewer).allowed);        // evicts b
  CHECK(l.size() == 3);
  CHECK_FALSE(l.admit("key:a", viewer).allowed);  // kept: still empty
  CHECK_FALSE(l.admit("key:c", viewer).allowed);  // kept: still empty
  CHECK(l.admit("key:b", viewer).allowed);        // forgotten: a fresh burst
  CHECK(l.size() == 3);
}

TEST_CASE("rate limiter: a clock that goes back neither refills nor freezes the bucket") {
  manual_clock clk;
  api::rate_limiter l(limits(), clk);
  const rate_limit viewer{1, 2};
  CHECK(admitted(l, "key:t", viewer, 3) == 2);
  const auto before = clk.now();
  clk.set(before - 1h);
  CHECK_FALSE(l.admit("key:t", viewer).allowed);
  clk.advance(1s);  // one second after the jump back: one token, not an hour's wait
  CHECK(l.admit("key:t", viewer).allowed);
}

namespace {

struct summary_fixture {
  testing::temp_dir dir;
  std::unique_ptr<store::database> db = open(dir.file("sandfort.db"));
  manual_clock clk;
  audit::journal journal{*db, clk};
  audit::rate_limit_summary summary{*db, journal, clk};

  static std::unique_ptr<store::database> open(const std::string& path) {
    auto d = store::database::open(path);
    REQUIRE(d);
    return std::move(d).value();
  }
  store::org org(const std::string& name, bool superadmin = false) {
    auto o = store::org_store(*db).create_org(name, superadmin, "t");
    REQUIRE(o);
    return *o;
  }
  std::vector<audit::event_record> events(const std::string& org_id) {
    store::audit_filter f;
    f.limit = 100000;
    auto list = store::audit_store(*db).list_audit_events(org_id, f);
    REQUIRE(list);
    return *list;
  }
};

}  // namespace

TEST_CASE("rate limit summary: one event per organization and principal and interval, in that organization's chain") {
  summary_fixture f;
  auto op = f.org("superadmin", true);
  auto a = f.org("a"), b = f.org("b");
  for (int i = 0; i < 250; ++i) {
    f.summary.note({a.id, "key:key-1", "10.0.0.1", {50, 200}});
    f.clk.advance(10ms);
  }
  f.summary.note({a.id, "key:key-2", "10.0.0.2", {50, 200}});
  f.summary.note({b.id, "oidc:alice@https://idp.test", "10.0.0.3", {0.5, 3}});
  CHECK(f.summary.pending() == 3);
  auto written = f.summary.flush();
  REQUIRE(written);
  CHECK(*written == 3);
  CHECK(f.summary.pending() == 0);

  auto in_a = f.events(a.id);
  REQUIRE(in_a.size() == 2);
  CHECK(in_a[0].action == "rate_limit.exceeded");
  CHECK(in_a[0].outcome == "denied");
  CHECK(in_a[0].actor == "key:key-1");
  CHECK(in_a[0].source == "10.0.0.1");
  auto d = nlohmann::json::parse(in_a[0].details);
  CHECK(d["count"] == 250);
  CHECK(d["burst"] == 200);
  CHECK(d["rate_per_s"] == "50.0");  // the chain holds no floats: their text
  CHECK(d["first"] < d["last"]);
  CHECK(nlohmann::json::parse(in_a[1].details)["count"] == 1);
  auto in_b = f.events(b.id);
  REQUIRE(in_b.size() == 1);
  CHECK(in_b[0].actor == "oidc:alice@https://idp.test");
  CHECK(nlohmann::json::parse(in_b[0].details)["rate_per_s"] == "0.5");
  CHECK(f.events(op.id).empty());
  CHECK(*f.summary.flush() == 0);
}

TEST_CASE("rate limit summary: a deleted organization's refusals go to the operator, distinct pairs are bounded") {
  summary_fixture f;
  auto op = f.org("superadmin", true);
  auto gone = f.org("gone"), busy = f.org("busy");
  f.summary.note({gone.id, "key:key-9", "10.0.0.9", {1, 1}});
  REQUIRE(store::org_store(*f.db).set_org_state(gone.id, "deleted", {"active"}, "t2"));
  for (std::size_t i = 0; i < audit::rate_limit_summary::max_pairs + 50; ++i)
    f.summary.note({busy.id, "key:k" + std::to_string(i), "10.0.0.1", {1, 1}});
  CHECK(f.summary.pending() == audit::rate_limit_summary::max_pairs + 1);  // the overflow pair
  REQUIRE(f.summary.flush());

  auto to_op = f.events(op.id);
  REQUIRE(to_op.size() == 1);
  CHECK(to_op[0].actor == "key:key-9");
  CHECK(nlohmann::json::parse(to_op[0].details)["org_id"] == gone.id);
  auto in_busy = f.events(busy.id);
  CHECK(in_busy.size() == audit::rate_limit_summary::max_pairs);
  long long total = 0;
  for (const auto& e : in_busy) total += nlohmann::json::parse(e.details)["count"].get<long long>();
  CHECK(total == static_cast<long long>(audit::rate_limit_summary::max_pairs + 50));
}

TEST_CASE("rate limiter: an organization's bucket bounds all its keys together, another organization's is its own") {
  manual_clock clk;
  api::rate_limiter l(limits(), clk);
  const rate_limit member{10, 5}, org{10, 6};
  auto one = [&](const std::string& key, const std::string& org_id) { return l.admit(key, member, "org:" + org_id, org); };
  int a = 0;
  for (int i = 0; i < 10; ++i) a += one("key:a", "x").allowed ? 1 : 0;
  CHECK(a == 5);  // its own bucket's burst: the organization's has one left
  auto own = one("key:a", "x");
  CHECK_FALSE(own.allowed);
  CHECK_FALSE(own.by_org);  // its own bucket was the empty one ...
  CHECK(one("key:b", "x").allowed);  // ... and the refusal took nothing from the organization's
  // A fresh key of the same organization finds the organization's bucket empty.
  auto fresh = one("key:c", "x");
  CHECK_FALSE(fresh.allowed);
  CHECK(fresh.by_org);
  CHECK(fresh.retry_after_s == 1);
  // Forty keys buy nothing more.
  int many = 0;
  for (int k = 0; k < 40; ++k) many += one("key:m" + std::to_string(k), "x").allowed ? 1 : 0;
  CHECK(many == 0);
  // Another organization is untouched.
  CHECK(one("key:d", "y").allowed);

  // A refused request took from neither: after 100 ms exactly one token is back.
  clk.advance(100ms);
  CHECK(one("key:c", "x").allowed);
  CHECK_FALSE(one("key:e", "x").allowed);

  // Unlimited keys (rate 0) are still bounded by their organization; an unlimited organization
  // bucket leaves the key's as it was.
  clk.advance(10s);
  int unlimited_key = 0;
  for (int i = 0; i < 20; ++i) unlimited_key += l.admit("key:u", {0, 0}, "org:z", org).allowed ? 1 : 0;
  CHECK(unlimited_key == 6);
  CHECK(admitted(l, "key:v", member, 20) == 5);
}

TEST_CASE("rate limiter: the operator has no organization bucket, every other principal has its organization's") {
  manual_clock clk;
  auto cfg = limits();
  cfg.org = {7, 70};
  api::rate_limiter l(cfg, clk);
  auth::principal p;
  p.granted = auth::role::admin;
  CHECK(l.org_limit_for(p).burst == 70);
  p.granted = auth::role::viewer;
  CHECK(l.org_limit_for(p).rate_per_s == 7);
  p.granted = auth::role::admin;
  p.superadmin = true;
  CHECK(l.org_limit_for(p).rate_per_s == 0);
}

TEST_CASE("rate limit summary: refusals by the organization's bucket are counted apart and say so") {
  summary_fixture f;
  auto a = f.org("a");
  f.summary.note({a.id, "key:key-1", "10.0.0.1", {50, 200}});
  f.summary.note({a.id, "key:key-1", "10.0.0.1", {200, 800}, true});
  f.summary.note({a.id, "key:key-1", "10.0.0.1", {200, 800}, true});
  REQUIRE(*f.summary.flush() == 2);
  auto in_a = f.events(a.id);
  REQUIRE(in_a.size() == 2);
  auto own = nlohmann::json::parse(in_a[0].details), org = nlohmann::json::parse(in_a[1].details);
  if (own.contains("bucket")) std::swap(own, org);
  CHECK_FALSE(own.contains("bucket"));
  CHECK(own["count"] == 1);
  CHECK(org["bucket"] == "organization");
  CHECK(org["count"] == 2);
  CHECK(org["burst"] == 800);
}
