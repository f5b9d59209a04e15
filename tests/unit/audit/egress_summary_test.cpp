// Egress decisions counted into few events: per organization, sandbox, host, port and decision,
// in that organization's chain; the untrusted rest in the operator's; bounded however many arrive.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "../store/open_db.hpp"
#include "../store/temp_dir.hpp"
#include "sandfort/audit/egress_summary.hpp"
#include "sandfort/audit/verifier.hpp"
#include "support/manual_clock.hpp"

using namespace sandfort;

namespace {

struct egress_fixture {
  testing::temp_dir dir;
  std::unique_ptr<store::database> db = testing::open_db(dir.file("sandfort.db"));
  testing::manual_clock clk;
  audit::journal journal{*db, clk};
  audit::egress_summary egress{*db, journal, clk};

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

audit::egress_decision allow(const std::string& org, const std::string& sbx, const std::string& host,
                             unsigned long long in, unsigned long long out) {
  return {org, sbx, host, 443, true, "closed", "10.213.0.5", in, out};
}

audit::egress_decision deny(const std::string& org, const std::string& sbx, const std::string& host,
                            const std::string& reason) {
  return {org, sbx, host, 443, false, reason, "10.213.0.5", 0, 0};
}

nlohmann::json details(const audit::event_record& e) { return nlohmann::json::parse(e.details); }

}  // namespace

TEST_CASE("egress summary: one event per sandbox, host, port and decision, in the sandbox's organization") {
  egress_fixture f;
  auto op = f.org("superadmin", true);
  auto a = f.org("a"), b = f.org("b");
  for (int i = 0; i < 300; ++i) f.egress.note(allow(a.id, "sbx-1", "example.com", 100, 10));
  for (int i = 0; i < 7; ++i) f.egress.note(deny(a.id, "sbx-1", "evil.test", "host not in the allowlist"));
  f.egress.note(deny(a.id, "sbx-1", "evil.test", "refused address: 169.254.169.254"));
  f.egress.note(allow(a.id, "sbx-1", "example.com", 1, 1));  // same key as the 300
  auto other_port = allow(a.id, "sbx-1", "example.com", 5, 5);
  other_port.port = 80;
  f.egress.note(other_port);
  f.egress.note(allow(b.id, "sbx-2", "example.com", 1, 2));
  CHECK(f.egress.pending() == 4);

  auto written = f.egress.flush();
  REQUIRE(written);
  CHECK(*written == 4);
  CHECK(f.egress.pending() == 0);

  auto in_a = f.events(a.id);
  REQUIRE(in_a.size() == 3);
  std::map<std::pair<std::string, int>, nlohmann::json> by_key;
  for (const auto& e : in_a) {
    CHECK(e.action == "egress");
    CHECK(e.target == "sbx-1");
    CHECK(e.actor == "sandbox:sbx-1");
    CHECK(e.source == "10.213.0.5");
    auto d = details(e);
    by_key[{e.outcome, d["port"].get<int>()}] = d;
  }
  const auto& allowed443 = by_key.at({"allowed", 443});
  CHECK(allowed443["host"] == "example.com");
  CHECK(allowed443["count"] == 301);
  CHECK(allowed443["bytes_in"] == 30001);
  CHECK(allowed443["bytes_out"] == 3001);
  CHECK(allowed443["reasons"]["closed"] == 301);
  const auto& denied = by_key.at({"denied", 443});
  CHECK(denied["host"] == "evil.test");
  CHECK(denied["count"] == 8);
  CHECK(denied["reasons"]["host not in the allowlist"] == 7);
  CHECK(denied["reasons"]["refused address: 169.254.169.254"] == 1);
  CHECK(by_key.at({"allowed", 80})["count"] == 1);

  auto in_b = f.events(b.id);
  REQUIRE(in_b.size() == 1);
  CHECK(details(in_b[0])["bytes_out"] == 2);
  CHECK(f.events(op.id).empty());
  CHECK(*f.egress.flush() == 0);  // nothing new
}

TEST_CASE("egress summary: decisions without a trusted organization, or of a deleted one, go to the operator") {
  egress_fixture f;
  auto gone = f.org("gone");
  f.egress.note(deny("", "sbx-claimed", "example.com", "unknown sandbox"));
  f.egress.note(deny("", "", "", "request head too large"));
  f.egress.note(allow(gone.id, "sbx-9", "example.com", 1, 1));
  // Not bootstrapped: nothing to write the untrusted ones into yet, and nothing is lost.
  CHECK_FALSE(f.egress.flush());
  CHECK(f.egress.pending() == 3);

  auto op = f.org("superadmin", true);
  REQUIRE(store::org_store(*f.db).set_org_state(gone.id, "deleted", {"active"}, "t2"));
  REQUIRE(*f.egress.flush() == 3);
  auto got = f.events(op.id);
  REQUIRE(got.size() == 3);
  std::map<std::string, audit::event_record> by_target;
  for (const auto& e : got) by_target[e.target] = e;
  CHECK(by_target.at("sbx-claimed").actor == "sandbox:sbx-claimed");
  CHECK(details(by_target.at("sbx-claimed"))["org_id"] == "");
  CHECK(by_target.at("").actor == "anonymous");
  CHECK(details(by_target.at("sbx-9"))["org_id"] == gone.id);
  CHECK(f.events(gone.id).empty());
}

TEST_CASE("egress summary: a flood of distinct hosts and reasons stays bounded and the chain verifies") {
  egress_fixture f;
  f.org("superadmin", true);
  auto a = f.org("a");
  f.egress.note(deny(a.id, "sbx-1", std::string(100000, 'x'), "r"));  // a claimed name is cut
  for (int i = 0; i < 25000; ++i) f.egress.note(deny(a.id, "sbx-1", "h" + std::to_string(i) + ".test", "r"));
  for (int i = 0; i < 50; ++i) f.egress.note(deny(a.id, "sbx-1", "h1.test", "reason " + std::to_string(i)));
  CHECK(f.egress.pending() <= audit::egress_summary::max_keys + 1);

  auto written = f.egress.flush();
  REQUIRE(written);
  auto got = f.events(a.id);
  REQUIRE(got.size() == static_cast<std::size_t>(*written));
  long long total = 0;
  for (const auto& e : got) {
    auto d = details(e);
    total += d["count"].get<long long>();
    CHECK(d["reasons"].size() <= audit::egress_summary::max_reasons + 1);
    CHECK(d["host"].get<std::string>().size() <= audit::egress_summary::max_field);
    if (d["host"] == "h1.test") CHECK(d["reasons"]["other"] == 50 + 1 - audit::egress_summary::max_reasons);
  }
  CHECK(total == 25000 + 50 + 1);  // every decision counted somewhere, the overflow included

  audit::chain_verifier v(a.id);
  for (const auto& e : got) REQUIRE(v.feed(e));
}

TEST_CASE("egress summary: on a full state disk the counts wait in memory and are written whole when space returns",
          "[full-disk]") {
  egress_fixture f;
  f.org("superadmin", true);
  auto a = f.org("a");
  f.egress.note(allow(a.id, "sbx-1", "example.com", 10, 20));
  REQUIRE(f.egress.flush());
  for (int i = 0; i < 5; ++i) f.egress.note(deny(a.id, "sbx-1", "evil.test", "not allowlisted"));

  // Below the floor: nothing is written, nothing is lost.
  REQUIRE(f.db->set_space_policy({std::int64_t{1} << 60, 0}));
  auto refused = f.egress.flush();
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::insufficient_storage);
  CHECK(f.egress.pending() == 1);
  CHECK(f.events(a.id).size() == 1);
  f.egress.note(deny(a.id, "sbx-1", "evil.test", "not allowlisted"));

  // The database itself has no room (SQLITE_FULL): the transaction keeps no event, the counts stay.
  REQUIRE(f.db->set_space_policy({0, 0}));
  auto pages = f.db->page_count();
  REQUIRE(pages);
  REQUIRE(f.db->set_max_page_count(*pages));
  for (int i = 0; i < 3000; ++i) f.egress.note(deny(a.id, "sbx-x" + std::to_string(i), "evil.test", "not allowlisted"));
  auto failed = f.egress.flush();
  REQUIRE_FALSE(failed);
  CHECK(failed.err().code == errc::insufficient_storage);
  CHECK(f.events(a.id).size() == 1);
  CHECK(f.egress.pending() == 3001);

  // Space again: every decision is in the chain, which verifies.
  REQUIRE(f.db->set_max_page_count(1 << 20));
  auto written = f.egress.flush();
  REQUIRE(written);
  CHECK(*written == 3001);
  auto got = f.events(a.id);
  REQUIRE(got.size() == 3002);
  long long denied = 0;
  for (const auto& e : got)
    if (e.outcome == "denied") denied += details(e)["count"].get<long long>();
  CHECK(denied == 5 + 1 + 3000);
  audit::chain_verifier v(a.id);
  for (const auto& e : got) REQUIRE(v.feed(e));
}

TEST_CASE("egress summary: injected secrets are counted by name in their key's event, no name no field") {
  egress_fixture f;
  f.org("superadmin", true);
  auto a = f.org("a");
  for (int i = 0; i < 3; ++i) {
    auto d = allow(a.id, "sbx-1", "api.openai.com", 10, 10);
    d.injected = {"openai"};
    f.egress.note(d);
  }
  auto both = allow(a.id, "sbx-1", "api.openai.com", 1, 1);
  both.injected = {"openai", "org-header"};
  f.egress.note(both);
  f.egress.note(allow(a.id, "sbx-1", "example.com", 1, 1));
  REQUIRE(*f.egress.flush() == 2);
  std::map<std::string, nlohmann::json> by_host;
  for (const auto& e : f.events(a.id)) by_host[details(e)["host"]] = details(e);
  CHECK(by_host.at("api.openai.com")["count"] == 4);
  CHECK(by_host.at("api.openai.com")["injected"] == nlohmann::json{{"openai", 4}, {"org-header", 1}});
  CHECK_FALSE(by_host.at("example.com").contains("injected"));
}
