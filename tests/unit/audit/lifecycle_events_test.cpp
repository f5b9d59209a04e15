// The event stream's view of the audit chain: which audit events are life-cycle events, of which
// type and reason; and the store's word to the stream's hub, given only for committed appends.
#include <catch2/catch.hpp>

#include "../store/open_db.hpp"
#include "../store/temp_dir.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/audit/lifecycle_events.hpp"
#include "support/manual_clock.hpp"

using namespace sandfort;

namespace {

audit::event_record lc_row(const std::string& action, const std::string& details, const std::string& outcome = "ok") {
  audit::event_record e;
  e.org_id = "org-000000000000000a";
  e.seq = 7;
  e.ts = "2026-01-02T03:04:05.678Z";
  e.actor = "system";
  e.action = action;
  e.target = "sbx-00000000000000aa";
  e.outcome = outcome;
  e.details = details;
  return e;
}

std::string lc_type_of(const audit::event_record& e) {
  auto ev = audit::lifecycle_event_of(e);
  return ev ? ev->type : std::string("(none)");
}

std::string lc_reason_of(const audit::event_record& e) {
  auto ev = audit::lifecycle_event_of(e);
  REQUIRE(ev);
  REQUIRE(ev->type == "sandbox.stopped");
  return ev->body.at("reason").get<std::string>();
}

struct lc_counting_observer final : store::append_observer {
  std::vector<std::pair<std::string, std::int64_t>> told;
  void appended(const std::string& org_id, std::int64_t seq) override { told.emplace_back(org_id, seq); }
};

}  // namespace

TEST_CASE("lifecycle events: actions map to types, everything else is no event") {
  CHECK(lc_type_of(lc_row("sandbox.create", R"({"name":"a"})")) == "sandbox.created");
  CHECK(lc_type_of(lc_row("sandbox.start", R"({"state":"started","from":"stopped"})")) == "sandbox.started");
  CHECK(lc_type_of(lc_row("sandbox.pause", R"({"state":"paused"})")) == "sandbox.paused");
  CHECK(lc_type_of(lc_row("sandbox.resume", R"({"state":"started"})")) == "sandbox.resumed");
  CHECK(lc_type_of(lc_row("sandbox.delete", R"({"state":"deleted"})")) == "sandbox.deleted");
  CHECK(lc_type_of(lc_row("snapshot.create", R"({"name":"s"})")) == "snapshot.created");
  CHECK(lc_type_of(lc_row("snapshot.delete", R"({"name":"s"})")) == "snapshot.deleted");
  CHECK(lc_type_of(lc_row("volume.create", R"({"name":"v"})")) == "volume.created");
  CHECK(lc_type_of(lc_row("volume.delete", R"({"name":"v"})")) == "volume.deleted");
  CHECK(lc_type_of(lc_row("guardrail.quota_exceeded", R"({"quota":"max_sandboxes"})", "denied")) == "quota.refused");
  CHECK(lc_type_of(lc_row("guardrail.host_full", "{}", "denied")) == "quota.refused");
  CHECK(lc_type_of(lc_row("rate_limit.exceeded", R"({"count":3})", "denied")) == "rate_limit.refused");
  CHECK(lc_type_of(lc_row("egress", R"({"count":4})", "denied")) == "egress.denied");
  // Provisioning steps, the daemon's own re-recording of an unchanged state, allowed egress,
  // commands and keys are no events.
  CHECK(lc_type_of(lc_row("sandbox.state", R"({"state":"started","from":"creating"})")) == "sandbox.started");
  CHECK(lc_type_of(lc_row("sandbox.state", R"({"state":"started","from":"started"})")) == "(none)");
  CHECK(lc_type_of(lc_row("sandbox.state", R"({"state":"pulling","from":"creating"})")) == "(none)");
  CHECK(lc_type_of(lc_row("sandbox.state", R"({"state":"deleted","from":"stopped"})")) == "sandbox.deleted");
  CHECK(lc_type_of(lc_row("egress", R"({"count":4})", "allowed")) == "(none)");
  CHECK(lc_type_of(lc_row("sandbox.exec", R"({"command":"ls"})", "accepted")) == "(none)");
  CHECK(lc_type_of(lc_row("api_key.create", "{}")) == "(none)");
  CHECK(lc_type_of(lc_row("org.delete", "{}", "started")) == "(none)");
  // Details that are not JSON (an edited row) do not throw.
  CHECK(lc_type_of(lc_row("sandbox.create", "not json")) == "sandbox.created");
}

TEST_CASE("lifecycle events: the store's life-cycle index holds every row that is an event, and not the others") {
  testing::temp_dir dir;
  auto db = testing::open_db(dir.file("s.db"));
  // Every row the mapping above makes an event, and rows of the kinds that fill a chain between.
  const std::vector<audit::event_record> rows = {
      lc_row("sandbox.create", "{}"), lc_row("sandbox.start", "{}"), lc_row("sandbox.stop", "{}"),
      lc_row("sandbox.pause", "{}"), lc_row("sandbox.resume", "{}"), lc_row("sandbox.delete", "{}"),
      lc_row("sandbox.state", R"({"state":"stopped","from":"started"})"), lc_row("snapshot.create", "{}"),
      lc_row("snapshot.delete", "{}"), lc_row("volume.create", "{}"), lc_row("volume.delete", "{}"),
      lc_row("guardrail.quota_exceeded", "{}", "denied"), lc_row("guardrail.host_full", "{}", "denied"),
      lc_row("rate_limit.exceeded", "{}", "denied"), lc_row("egress", "{}", "denied"),
      lc_row("sandbox.exec", "{}", "accepted"), lc_row("files.write", "{}"), lc_row("api_key.create", "{}"),
      lc_row("secret.create", "{}"), lc_row("guardrails", "{}")};
  std::int64_t seq = 0;
  for (auto e : rows) {
    e.seq = ++seq;
    REQUIRE(store::audit_store(*db).insert_audit_event(e));
  }
  store::audit_filter f;
  f.limit = 100;
  f.lifecycle_only = true;
  auto listed = store::audit_store(*db).list_audit_events("org-000000000000000a", f);
  REQUIRE(listed);
  std::vector<std::string> actions;
  for (const auto& e : *listed) actions.push_back(e.action);
  std::vector<std::string> events;
  for (const auto& e : rows)
    if (audit::lifecycle_event_of(e)) events.push_back(e.action);
  CHECK(events.size() == 15);
  CHECK(actions == events);
  // The index's WHERE in C++ (what append observers are told of) agrees with it row by row.
  std::vector<std::string> by_predicate;
  for (const auto& e : rows)
    if (store::is_lifecycle_action(e.action)) by_predicate.push_back(e.action);
  CHECK(by_predicate == actions);
}

TEST_CASE("lifecycle events: every stop has a reason, recorded or read from an older event's message") {
  CHECK(lc_reason_of(lc_row("sandbox.stop", R"({"state":"stopped","reason":"idle_timeout"})")) == "idle_timeout");
  CHECK(lc_reason_of(lc_row("sandbox.state", R"({"state":"stopped","from":"started","reason":"oom"})")) == "oom");
  CHECK(lc_reason_of(lc_row("sandbox.state", R"({"state":"error","from":"started","reason":"error"})")) == "error");
  // Written before reasons were recorded.
  CHECK(lc_reason_of(lc_row("sandbox.stop", R"({"state":"stopped"})")) == "request");
  CHECK(lc_reason_of(lc_row("sandbox.stop", R"({"state":"stopped","message":"stopped by the organization's kill switch"})")) ==
        "kill_switch");
  CHECK(lc_reason_of(lc_row("sandbox.stop", R"j({"state":"stopped","message":"stopped: TTL reached (expired at x)"})j")) == "ttl");
  CHECK(lc_reason_of(lc_row("sandbox.stop", R"({"state":"stopped","message":"stopped: idle for 3 s"})")) == "idle_timeout");
  CHECK(lc_reason_of(lc_row("sandbox.state", R"j({"state":"stopped","message":"the container exited with code 137 (out of memory)"})j")) ==
        "oom");
  CHECK(lc_reason_of(lc_row("sandbox.state", R"({"state":"stopped","message":"the container exited with code 0"})")) ==
        "exited");
  CHECK(lc_reason_of(lc_row("sandbox.state",
                      R"({"state":"stopped","message":"the container was not running when sandfortd started"})")) ==
        "daemon_restart");
  CHECK(lc_reason_of(lc_row("sandbox.state", R"({"state":"error","message":"pull failed"})")) == "error");
  auto ev = audit::lifecycle_event_of(lc_row("sandbox.stop", R"({"state":"stopped","reason":"request"})"));
  REQUIRE(ev);
  CHECK(ev->seq == 7);
  CHECK(ev->body.at("seq") == 7);
  CHECK(ev->body.at("org_id") == "org-000000000000000a");
  CHECK(ev->body.at("details").at("state") == "stopped");
  CHECK_FALSE(ev->body.contains("source"));
}

TEST_CASE("lifecycle events: types are a fixed set") {
  CHECK(audit::is_lifecycle_event_type("sandbox.stopped"));
  CHECK(audit::is_lifecycle_event_type("egress.denied"));
  CHECK_FALSE(audit::is_lifecycle_event_type("sandbox.exec"));
  CHECK_FALSE(audit::is_lifecycle_event_type(""));
  CHECK(audit::lifecycle_event_types().size() == 13);
}

TEST_CASE("append observer: told of committed appends only, after the commit") {
  testing::temp_dir dir;
  auto db = testing::open_db(dir.file("sandfort.db"));
  testing::manual_clock clk;
  audit::journal journal{*db, clk};
  lc_counting_observer seen;
  db->observe_appends(&seen);
  const std::string org = "org-000000000000000a";

  // A change that fails after its event was appended: rolled back, nobody told.
  {
    auto tx = db->begin();
    REQUIRE(tx);
    REQUIRE(journal.append(org, audit::system_actor(), {"sandbox.create", "sbx-1"}));
    CHECK(seen.told.empty());  // not before the commit
  }
  CHECK(seen.told.empty());

  // Two chains in one transaction: both told at the commit.
  std::size_t told_before_commit = 99;
  REQUIRE(journal.record_change(
      {org, "org-000000000000000b"}, audit::system_actor(),
      [&]() -> result<void> {
        told_before_commit = seen.told.size();
        return {};
      },
      [] { return audit::record{"sandbox.stop", "sbx-x"}; }));
  CHECK(told_before_commit == 0);
  REQUIRE(seen.told.size() == 2);
  CHECK(seen.told[0] == std::pair<std::string, std::int64_t>{org, 1});
  CHECK(seen.told[1] == std::pair<std::string, std::int64_t>{"org-000000000000000b", 1});

  REQUIRE(journal.record_event(org, audit::system_actor(), {"sandbox.stop", "sbx-1"}));
  REQUIRE(seen.told.size() == 3);
  CHECK(seen.told[2] == std::pair<std::string, std::int64_t>{org, 2});

  // Rows that are not life-cycle events (an exec, an organization's change) wake nobody.
  REQUIRE(journal.record_event(org, audit::system_actor(), {"sandbox.exec", "sbx-1"}));
  REQUIRE(journal.record_event(org, audit::system_actor(), {"org.disable", "org-x"}));
  CHECK(seen.told.size() == 3);

  db->observe_appends(nullptr);
  REQUIRE(journal.record_event(org, audit::system_actor(), {"sandbox.stop", "sbx-1"}));
  CHECK(seen.told.size() == 3);
}
