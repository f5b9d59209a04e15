// A store with a long history: what a request costs must not grow with the sandboxes an
// organization deleted. Query plans, the work each call does (SQLite VM steps, compared between a
// store without history and one with 20,000 deleted rows), statement reuse, labels kept in step
// with their rows, pruning and the WAL.
#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>

#include "sandfort/core/ids.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/guardrail_store.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"
#include "plan_rules.hpp"
#include "temp_dir.hpp"
#include "open_db.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

namespace {

constexpr int live_count = 40;
constexpr int deleted_count = 20000;

std::string spec_with(const std::map<std::string, std::string>& labels) {
  std::string json = R"({"env":{},"labels":{)";
  bool first = true;
  for (const auto& [k, v] : labels) {
    json += (first ? "\"" : ",\"") + k + "\":\"" + v + "\"";
    first = false;
  }
  return json + "}}";
}

// Live ids spread evenly over the id space, so that random deleted ids fall between them.
std::string live_id(int n) {
  char buf[32];
  const std::uint64_t step = UINT64_MAX / (live_count + 1);
  std::snprintf(buf, sizeof buf, "sbx-%016" PRIx64, static_cast<std::uint64_t>(n + 1) * step);
  return buf;
}

sandbox_record row(const std::string& org_id, const std::string& id, const std::string& name,
                   const std::string& state, const std::map<std::string, std::string>& labels,
                   const std::string& updated_at = t0) {
  sandbox_record s;
  s.id = id;
  s.org_id = org_id;
  s.name = name;
  s.state = state;
  s.snapshot = "sandfort/base:bookworm";
  s.spec_json = spec_with(labels);
  s.created_at = t0;
  s.updated_at = updated_at;
  return s;
}

// Live sandboxes 0..39 named web-N; even ones carry team=a, every fourth also tier=gold;
// 0..29 are started, the rest stopped.
std::map<std::string, std::string> live_labels(int n) {
  std::map<std::string, std::string> l{{"team", n % 2 == 0 ? "a" : "b"}};
  if (n % 4 == 0) l["tier"] = "gold";
  return l;
}

// One organization (and its key) with the live sandboxes above and, with history, 20,000
// deleted ones that look like them: same names, same labels, ids all over the key space.
struct history_store {
  testing::temp_dir dir;
  std::unique_ptr<database> db;
  std::string org_id;

  explicit history_store(bool with_history) {
    db = open_db(dir.file("sandfort.db"));
    auto o = org_store(*db).create_org("acme", false, t0);
    REQUIRE(o);
    org_id = o->id;
    api_key k{"key-00000000000000aa", org_id, "k", "member", t0, std::nullopt, std::nullopt, std::nullopt};
    REQUIRE(org_store(*db).insert_api_key(k, std::string(64, 'a')));
    auto tx = db->begin();
    REQUIRE(tx);
    for (int n = 0; n < live_count; ++n)
      REQUIRE(sandbox_store(*db).insert_sandbox(
          row(org_id, live_id(n), "web-" + std::to_string(n), n < 30 ? "started" : "stopped", live_labels(n))));
    if (with_history) {
      for (int i = 0; i < deleted_count; ++i)
        REQUIRE(sandbox_store(*db).insert_sandbox(row(org_id, new_id("sbx-"), "web-" + std::to_string(i % live_count),
                                                      "deleted", live_labels(i % live_count))));
    }
    REQUIRE(tx->commit());
  }
};

std::vector<std::string> ids_of(const std::vector<sandbox_record>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.id);
  return out;
}

// A label filter or a state: the arguments of one list call.
sandbox_filter filter(std::string state, std::vector<std::pair<std::string, std::string>> labels,
                      std::string after = "", std::size_t limit = 5) {
  sandbox_filter f;
  f.state = std::move(state);
  f.labels = std::move(labels);
  f.after_id = std::move(after);
  f.limit = limit;
  return f;
}

struct call {
  const char* name;
  std::function<std::string(history_store&)> run;  // the result, as text to compare between stores
};

// Every call a request makes, with what it returned.
std::vector<call> request_calls() {
  auto list = [](sandbox_filter f) {
    return [f](history_store& s) {
      auto rows = sandbox_store(*s.db).list_sandboxes(s.org_id, f);
      REQUIRE(rows);
      std::string out;
      for (const auto& id : ids_of(*rows)) out += id + " ";
      return out;
    };
  };
  return {
      {"key by hash", [](history_store& s) { return org_store(*s.db).find_api_key_by_hash(std::string(64, 'a'))->id; }},
      {"org by id", [](history_store& s) { return org_store(*s.db).get_org(s.org_id)->name; }},
      {"sandbox by id", [](history_store& s) { return sandbox_store(*s.db).get_sandbox(s.org_id, live_id(7))->name; }},
      {"sandbox by name", [](history_store& s) { return sandbox_store(*s.db).get_sandbox(s.org_id, "web-7")->id; }},
      {"sandbox not found",
       [](history_store& s) {
         return std::string(to_string(sandbox_store(*s.db).get_sandbox(s.org_id, "web-99").err().code));
       }},
      {"live sandbox by id", [](history_store& s) { return sandbox_store(*s.db).find_live_sandbox(live_id(3))->name; }},
      {"list first page", list(filter("", {}))},
      {"list from a cursor", list(filter("", {}, live_id(20)))},
      {"list by state", list(filter("stopped", {}))},
      {"list by label", list(filter("", {{"team", "a"}}, live_id(3)))},
      {"list by two labels", list(filter("", {{"team", "a"}, {"tier", "gold"}}))},
      {"list by state and label", list(filter("stopped", {{"team", "b"}}))},
      {"list by a label nobody has", list(filter("", {{"team", "zzz"}}))},
      {"live sandboxes of the organization",
       [](history_store& s) { return std::to_string(sandbox_store(*s.db).list_live_sandboxes(s.org_id)->size()); }},
      {"live sandboxes of all organizations",
       [](history_store& s) { return std::to_string(sandbox_store(*s.db).list_live_sandboxes_all_orgs()->size()); }},
      {"spec update",
       [](history_store& s) {
         auto r = sandbox_store(*s.db).get_sandbox(s.org_id, live_id(5));
         REQUIRE(r);
         r->spec_json = spec_with({{"team", "b"}, {"patched", "yes"}});
         REQUIRE(sandbox_store(*s.db).update_sandbox_spec(*r));
         r->spec_json = spec_with(live_labels(5));
         REQUIRE(sandbox_store(*s.db).update_sandbox_spec(*r));
         return std::string("ok");
       }},
  };
}

// The VM steps of one call, from a warm cache (the first run may compile the statement).
std::uint64_t steps_of(history_store& s, const call& c, std::string& result) {
  result = c.run(s);
  const auto before = s.db->stats().vm_steps;
  CHECK(c.run(s) == result);
  return s.db->stats().vm_steps - before;
}

std::int64_t file_size(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path, ec);
  return ec ? -1 : static_cast<std::int64_t>(n);
}

}  // namespace

TEST_CASE("history: no statement on a request's path reads deleted rows", "[history]") {
  history_store s(true);
  auto plans = s.db->explain_request_paths();
  REQUIRE(plans);
  std::vector<std::string> names;
  for (const auto& p : *plans) {
    names.push_back(p.name);
    std::string text;
    for (const auto& step : p.steps) text += step + "\n";
    INFO(p.name << ":\n" << text);
    CHECK_FALSE(p.steps.empty());
    for (const auto& step : p.steps) CHECK_FALSE(reads_history(step));
  }
  for (const char* expected : {"api key by hash", "organization by id", "sandbox by id", "sandbox by name",
                               "live sandbox by id (egress proxy, preview router)", "sandbox update",
                               "sandbox spec update", "list", "list by state", "list by label", "list by two labels",
                               "list by state and label", "live sandboxes of an organization (quotas)",
                               "live sandboxes of all organizations (reaper)",
                               "live volumes of an organization (quotas)",
                               "live snapshots of an organization (quotas)", "audit chain head"})
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());

  auto plan_of = [&](const std::string& name) {
    for (const auto& p : *plans)
      if (p.name == name) return p.steps;
    return std::vector<std::string>{};
  };
  // The two lookups behind every sandbox-scoped call, exactly.
  CHECK(plan_of("sandbox by id") ==
        std::vector<std::string>{"SEARCH sandboxes USING INDEX sqlite_autoindex_sandboxes_1 (id=?)"});
  CHECK(plan_of("sandbox by name") ==
        std::vector<std::string>{"SEARCH sandboxes USING INDEX sandboxes_live_name (org_id=? AND name=?)"});
  // The volume and snapshot quotas count the organization's entries of the live-only indexes.
  CHECK(plan_of("live volumes of an organization (quotas)") ==
        std::vector<std::string>{"SEARCH volumes USING INDEX volumes_live_name (org_id=?)"});
  CHECK(plan_of("live snapshots of an organization (quotas)") ==
        std::vector<std::string>{"SEARCH snapshots USING INDEX snapshots_live_name (org_id=?)"});
  CHECK(plan_of("list by label").front() ==
        "SEARCH l USING COVERING INDEX sandbox_labels_by_value (org_id=? AND key=? AND value=? AND sandbox_id>?)");
}

TEST_CASE("history: the rule above catches the plans this store had before", "[history]") {
  // What `org_id = ?1 AND (id = ?2 OR name = ?2)` planned to, and the old list's range.
  CHECK(reads_history("SEARCH sandboxes USING INDEX sandboxes_by_org (org_id=?)"));
  CHECK(reads_history("SEARCH sandboxes USING INDEX sandboxes_by_org (org_id=? AND id>?)"));
  CHECK(reads_history("SCAN sandboxes USING INDEX sqlite_autoindex_sandboxes_1"));
  CHECK(reads_history("SCAN sandboxes"));
  CHECK_FALSE(reads_history("SEARCH sandboxes USING INDEX sandboxes_live_by_org (org_id=? AND id>?)"));
}

TEST_CASE("history: every request-path call does the same work with 20,000 deleted rows as with none",
          "[history]") {
  history_store fresh(false);
  history_store old(true);
  for (const auto& c : request_calls()) {
    INFO(c.name);
    std::string fresh_result, old_result;
    auto fresh_steps = steps_of(fresh, c, fresh_result);
    auto old_steps = steps_of(old, c, old_result);
    CHECK(old_result == fresh_result);
    CHECK(old_steps == fresh_steps);
    CHECK(fresh_steps > 0);
  }
  // The measure sees history where a call asks for it: a search of deleted sandboxes by a label
  // none has finds nothing in either store, after reading every deleted row of the old one.
  std::string fresh_found, old_found;
  const call deleted{
      "search deleted", [](history_store& s) {
        auto rows = sandbox_store(*s.db).list_sandboxes(s.org_id, filter("deleted", {{"team", "zzz"}}, "", 100));
        return std::to_string(rows->size());
      }};
  auto fresh_steps = steps_of(fresh, deleted, fresh_found);
  auto old_steps = steps_of(old, deleted, old_found);
  CHECK(fresh_found == "0");
  CHECK(old_found == "0");
  CHECK(old_steps > 100 * fresh_steps);
}

TEST_CASE("history: statements are compiled once per connection and reused", "[history]") {
  history_store s(false);
  REQUIRE(sandbox_store(*s.db).get_sandbox(s.org_id, "web-1"));
  REQUIRE(org_store(*s.db).find_api_key_by_hash(std::string(64, 'a')));
  REQUIRE(sandbox_store(*s.db).list_sandboxes(s.org_id, filter("", {{"team", "a"}})));
  const auto warm = s.db->stats();
  for (int i = 0; i < 50; ++i) {
    REQUIRE(sandbox_store(*s.db).get_sandbox(s.org_id, "web-1"));
    REQUIRE(sandbox_store(*s.db).get_sandbox(s.org_id, live_id(i % live_count)));
    REQUIRE(org_store(*s.db).find_api_key_by_hash(std::string(64, 'a')));
    REQUIRE(sandbox_store(*s.db).list_sandboxes(s.org_id, filter("", {{"team", "a"}})));
  }
  CHECK(s.db->stats().prepared == warm.prepared);
  CHECK(s.db->stats().reused >= warm.reused + 250);  // by name: two lookups; by id: one
}

TEST_CASE("history: a statement in use is not lent twice", "[history]") {
  history_store s(false);
  for (std::int64_t seq = 1; seq <= 3; ++seq) {
    audit::event_record e;
    e.org_id = s.org_id;
    e.seq = seq;
    e.ts = t0;
    e.actor = "a";
    e.action = "x";
    e.outcome = "ok";
    e.prev_hash = "p";
    e.hash = "h" + std::to_string(seq);
    REQUIRE(audit_store(*s.db).insert_audit_event(e));
  }
  // The same scan from inside the scan's own callback: each must see its own rows.
  std::vector<std::int64_t> outer, inner;
  REQUIRE(audit_store(*s.db).scan_audit_events(s.org_id, 1, [&](const audit::event_record& e) {
    outer.push_back(e.seq);
    if (e.seq == 2)
      REQUIRE(audit_store(*s.db).scan_audit_events(s.org_id, 2, [&](const audit::event_record& f) {
        inner.push_back(f.seq);
        return true;
      }));
    return true;
  }));
  CHECK(outer == std::vector<std::int64_t>{1, 2, 3});
  CHECK(inner == std::vector<std::int64_t>{2, 3});
}

TEST_CASE("history: labels follow their row through create, PATCH and delete, pages are full", "[history]") {
  history_store s(true);
  auto all = [&](sandbox_filter f) {
    std::vector<std::string> seen;
    f.limit = 3;
    for (int pages = 0; pages < 100; ++pages) {
      auto rows = sandbox_store(*s.db).list_sandboxes(s.org_id, f);
      REQUIRE(rows);
      auto ids = ids_of(*rows);
      seen.insert(seen.end(), ids.begin(), ids.end());
      if (rows->size() < f.limit) break;
      CHECK(rows->size() == f.limit);  // full pages until the last one
      f.after_id = rows->back().id;
    }
    return seen;
  };
  std::vector<std::string> team_a, gold, stopped_b;
  for (int n = 0; n < live_count; ++n) {
    if (n % 2 == 0) team_a.push_back(live_id(n));
    if (n % 4 == 0) gold.push_back(live_id(n));
    if (n >= 30 && n % 2 == 1) stopped_b.push_back(live_id(n));
  }
  CHECK(all(filter("", {{"team", "a"}})) == team_a);
  CHECK(all(filter("", {{"tier", "gold"}, {"team", "a"}})) == gold);
  CHECK(all(filter("stopped", {{"team", "b"}})) == stopped_b);
  CHECK(all(filter("", {{"team", "a"}, {"team", "b"}})).empty());

  // PATCH: the new labels count at once, the old ones no more.
  auto r = sandbox_store(*s.db).get_sandbox(s.org_id, live_id(1));
  REQUIRE(r);
  r->spec_json = spec_with({{"team", "a"}, {"owner", "kim"}});
  REQUIRE(sandbox_store(*s.db).update_sandbox_spec(*r));
  CHECK(all(filter("", {{"owner", "kim"}})) == std::vector<std::string>{live_id(1)});
  CHECK(all(filter("", {{"team", "a"}})).size() == team_a.size() + 1);
  // A state change keeps them; deletion removes them from every live list...
  r->state = "stopped";
  REQUIRE(sandbox_store(*s.db).update_sandbox(*r));
  CHECK(all(filter("stopped", {{"owner", "kim"}})) == std::vector<std::string>{live_id(1)});
  r->state = "deleted";
  REQUIRE(sandbox_store(*s.db).update_sandbox(*r));
  CHECK(all(filter("", {{"owner", "kim"}})).empty());
  // ...while a list of deleted sandboxes still finds it by the labels in its spec.
  auto gone = sandbox_store(*s.db).list_sandboxes(s.org_id, filter("deleted", {{"owner", "kim"}}, "", 10));
  REQUIRE(gone);
  CHECK(ids_of(*gone) == std::vector<std::string>{live_id(1)});

  // A row with a spec that is not JSON (or labels that are not strings) is stored, unlabelled.
  auto odd = row(s.org_id, new_id("sbx-"), "", "started", {});
  odd.spec_json = "not json";
  REQUIRE(sandbox_store(*s.db).insert_sandbox(odd));
  auto numeric = row(s.org_id, new_id("sbx-"), "", "started", {});
  numeric.spec_json = R"({"labels":{"team":7,"n":"1"}})";
  REQUIRE(sandbox_store(*s.db).insert_sandbox(numeric));
  CHECK(all(filter("", {{"n", "1"}})) == std::vector<std::string>{numeric.id});
  CHECK(all(filter("", {{"team", "7"}})).empty());

  std::vector<std::pair<std::string, std::string>> many(65, {"k", "v"});
  auto refused = sandbox_store(*s.db).list_sandboxes(s.org_id, filter("", many));
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::invalid_argument);
}

TEST_CASE("history: pruning removes old deleted rows in batches, oldest first, and nothing else", "[history]") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("sandfort.db"));
  auto o = org_store(*db).create_org("acme", false, t0);
  REQUIRE(o);
  auto at = [](int day) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "2026-01-%02dT00:00:00.000Z", day);
    return std::string(buf);
  };
  // Deleted on days 1..10, three a day; live ones last touched on day 1; one deleted sandbox's
  // name taken again by a live one.
  std::vector<std::string> deleted_early, deleted_late, live;
  for (int day = 1; day <= 10; ++day)
    for (int i = 0; i < 3; ++i) {
      auto r = row(o->id, new_id("sbx-"), day == 1 && i == 0 ? "web" : "", "deleted", {{"team", "a"}}, at(day));
      REQUIRE(sandbox_store(*db).insert_sandbox(r));
      (day < 8 ? deleted_early : deleted_late).push_back(r.id);
    }
  for (const char* state : {"started", "stopped", "error", "creating"}) {
    auto r = row(o->id, new_id("sbx-"), std::string("live-") + state, state, {{"team", "a"}}, at(1));
    REQUIRE(sandbox_store(*db).insert_sandbox(r));
    live.push_back(r.id);
  }
  REQUIRE(sandbox_store(*db).insert_sandbox(row(o->id, new_id("sbx-"), "web", "started", {}, at(1))));
  // A deadline left on a deleted sandbox must not block its pruning.
  REQUIRE(guardrail_store(*db).set_sandbox_deadline({deleted_early[0], o->id, at(2), "ttl"}));

  // Cutoff day 8: 21 rows are older. Batches of 5: 5, 5, 5, 5, 1, then nothing.
  std::vector<std::size_t> batches;
  for (;;) {
    auto n = sandbox_store(*db).prune_deleted_sandboxes(at(8), 5);
    REQUIRE(n);
    batches.push_back(*n);
    if (*n < 5) break;
  }
  CHECK(batches == std::vector<std::size_t>{5, 5, 5, 5, 1});
  auto remaining = sandbox_store(*db).list_sandboxes(o->id, filter("deleted", {}, "", 100));
  REQUIRE(remaining);
  auto ids = ids_of(*remaining);
  std::sort(deleted_late.begin(), deleted_late.end());
  CHECK(ids == deleted_late);
  for (const auto& id : live) CHECK(sandbox_store(*db).get_sandbox(o->id, id).ok());
  CHECK(sandbox_store(*db).get_sandbox(o->id, "web").ok());
  CHECK(guardrail_store(*db).due_sandbox_deadlines("2027-01-01T00:00:00.000Z", 10)->empty());
  CHECK(*sandbox_store(*db).prune_deleted_sandboxes(at(8), 5) == 0);
  // The oldest go first: a batch of 2 with cutoff day 10 takes the two of day 8.
  REQUIRE(*sandbox_store(*db).prune_deleted_sandboxes(at(10), 2) == 2);
  auto after = sandbox_store(*db).list_sandboxes(o->id, filter("deleted", {}, "", 100));
  REQUIRE(after);
  CHECK(after->size() == 7);
  for (const auto& r : *after) CHECK(r.updated_at >= at(8));
  CHECK(std::count_if(after->begin(), after->end(), [&](const auto& r) { return r.updated_at == at(8); }) == 1);
}

TEST_CASE("history: a WAL checkpoint copies the whole log back, or says it is busy while a reader holds it", "[history]") {
  testing::temp_dir dir;
  const auto path = dir.file("sandfort.db");
  auto db = open_db(path);
  db->set_busy_timeout(std::chrono::milliseconds(20));
  auto o = org_store(*db).create_org("acme", false, t0);
  REQUIRE(o);
  for (int i = 0; i < 200; ++i)
    REQUIRE(sandbox_store(*db).insert_sandbox(row(o->id, new_id("sbx-"), "", "started", {{"k", "v"}})));
  CHECK(file_size(path + "-wal") > 0);

  // A reader in the middle of a read keeps the frames it may need.
  sqlite3* reader = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &reader, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(reader, "SELECT id FROM sandboxes", -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  REQUIRE(sandbox_store(*db).insert_sandbox(row(o->id, new_id("sbx-"), "", "started", {})));
  auto busy = db->checkpoint_wal();
  REQUIRE(busy);
  CHECK(busy->busy);
  CHECK(file_size(path + "-wal") > 0);
  sqlite3_finalize(st);
  sqlite3_close(reader);

  auto done = db->checkpoint_wal();
  REQUIRE(done);
  CHECK_FALSE(done->busy);
  CHECK(done->log_frames == done->checkpointed_frames);
  // The file is kept (it is the store's reserve for a full disk): the next write starts it again
  // from the top instead of growing it.
  const auto kept = file_size(path + "-wal");
  REQUIRE(sandbox_store(*db).insert_sandbox(row(o->id, new_id("sbx-"), "", "started", {})));
  CHECK(file_size(path + "-wal") == kept);
  auto rows = sandbox_store(*db).list_sandboxes(o->id, filter("", {}, "", 1000));
  REQUIRE(rows);
  CHECK(rows->size() == 202);
}

TEST_CASE("history: a version 5 database gains the labels of its live sandboxes at open", "[history]") {
  testing::temp_dir dir;
  const auto path = dir.file("sandfort.db");
  std::string org_id, kept, gone;
  {
    auto db = open_db(path);
    org_id = org_store(*db).create_org("acme", false, t0)->id;
    kept = new_id("sbx-");
    gone = new_id("sbx-");
    REQUIRE(sandbox_store(*db).insert_sandbox(row(org_id, kept, "a", "started", {{"team", "x"}})));
    REQUIRE(sandbox_store(*db).insert_sandbox(row(org_id, gone, "b", "deleted", {{"team", "x"}})));
  }
  {
    // Back to the schema as version 5 had it.
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw,
                         "DROP TABLE snapshots; DROP INDEX sandboxes_live_by_snapshot; "
                         "DROP TRIGGER sandbox_volumes_on_sandbox_deleted; DROP TRIGGER sandbox_volumes_on_sandbox_delete; "
                         "DROP TABLE sandbox_volumes; DROP TABLE volumes; "
                         "DROP TRIGGER sandbox_labels_on_insert; DROP TRIGGER sandbox_labels_on_update; "
                         "DROP TRIGGER sandbox_labels_on_delete; DROP TRIGGER sandbox_deadlines_on_delete; "
                         "DROP TABLE sandbox_labels; DROP INDEX sandboxes_live_by_org; "
                         "DROP INDEX sandboxes_deleted_at; "
                         "ALTER TABLE org_guardrails DROP COLUMN max_volumes; "
                         "ALTER TABLE org_guardrails DROP COLUMN max_snapshots; ALTER TABLE org_guardrails DROP COLUMN max_disk_mb; "
                         "ALTER TABLE org_guardrails DROP COLUMN allowed_runtimes; "
                         "ALTER TABLE org_guardrails DROP COLUMN egress_defaults; "
                         "DROP TABLE e2b_access_tokens; DROP TABLE console_sessions; DROP TABLE console_logins; "
                         "DROP TABLE secrets; DROP TABLE interception_cas; DROP INDEX audit_lifecycle; "
                         "DROP TABLE webhooks; DROP TABLE webhook_deliveries; PRAGMA user_version = 5",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = open_db(path);
  CHECK(db->schema_version() == 18);
  auto rows = sandbox_store(*db).list_sandboxes(org_id, filter("", {{"team", "x"}}));
  REQUIRE(rows);
  CHECK(ids_of(*rows) == std::vector<std::string>{kept});
}
