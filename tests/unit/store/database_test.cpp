#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <catch2/catch.hpp>

#include "sandfort/core/ids.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/guardrail_store.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"
#include "temp_dir.hpp"
#include "open_db.hpp"
#include "rows.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

namespace {

constexpr int migration_count = 18;

}  // namespace

TEST_CASE("a fresh file is migrated, in WAL mode, and reopening changes nothing") {
  testing::temp_dir dir;
  const auto path = dir.file("sandfort.db");
  std::string instance;
  {
    auto db = open_db(path);
    CHECK(db->schema_version() == migration_count);
    CHECK(is_id(db->instance_id(), "", 16));
    instance = db->instance_id();
    CHECK(db->ping());
    CHECK(raw_query(path, "PRAGMA journal_mode") == "wal");
    make_org(*db, "acme");
  }
  {
    auto db = open_db(path);
    CHECK(db->schema_version() == migration_count);
    CHECK(db->instance_id() == instance);
    auto orgs = org_store(*db).list_orgs();
    REQUIRE(orgs);
    CHECK(orgs->size() == 1);
  }
  CHECK(raw_query(path, "SELECT count(*) FROM meta WHERE key = 'instance_id'") == "1");
  CHECK(raw_query(path, "PRAGMA user_version") == std::to_string(migration_count));
}

TEST_CASE("two databases get different instance ids") {
  testing::temp_dir dir;
  auto a = open_db(dir.file("a.db"));
  auto b = open_db(dir.file("b.db"));
  CHECK(a->instance_id() != b->instance_id());
}

TEST_CASE("a write lock held by another process fails fast as unavailable, not a long wait") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  db->set_busy_timeout(std::chrono::milliseconds(20));
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(dir.file("s.db").c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  auto blocked = org_store(*db).create_org("while-locked", false, t0);
  REQUIRE_FALSE(blocked.ok());
  CHECK(blocked.err().code == errc::unavailable);
  // Readers are not blocked by a writer in WAL mode.
  CHECK(db->ping().ok());
  REQUIRE(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  CHECK(org_store(*db).create_org("after", false, t0).ok());
}

TEST_CASE("begin_if_free takes a free lock, fails at once on a held one, and leaves the connection's own wait as it was") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  {
    auto tx = db->begin_if_free();
    REQUIRE(tx);
    REQUIRE(tx->commit());
  }
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(dir.file("s.db").c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  auto busy = db->begin_if_free();
  REQUIRE_FALSE(busy);
  CHECK(busy.err().code == errc::unavailable);
  CHECK_FALSE(db->in_transaction());
  // The other connection lets go a little later: begin() waits for it (its 5 s), as before.
  std::thread release([other] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
  });
  auto waited = db->begin();
  release.join();
  sqlite3_close(other);
  REQUIRE(waited);
  CHECK(waited->commit());
}

TEST_CASE("a database newer than the code is refused") {
  testing::temp_dir dir;
  const auto path = dir.file("future.db");
  { open_db(path); }
  {
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw, "PRAGMA user_version = 999", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = database::open(path);
  REQUIRE_FALSE(db);
  CHECK(db.err().code == errc::internal);
  CHECK_THAT(db.err().message, Catch::Contains("999") && Catch::Contains(path));
}

TEST_CASE("opening a path that cannot exist names the file") {
  testing::temp_dir dir;
  const auto path = dir.file("missing/dir/sandfort.db");
  auto db = database::open(path);
  REQUIRE_FALSE(db);
  CHECK(db.err().code == errc::internal);
  CHECK_THAT(db.err().message, Catch::Contains(path));
}

TEST_CASE("a version 3 database gains the audit tables at open and keeps its rows") {
  testing::temp_dir dir;
  const auto path = dir.file("sandfort.db");
  std::string org_id;
  { org_id = make_org(*open_db(path), "acme").id; }
  {
    // Back to the schema as version 3 shipped it: without what versions 4 (audit), 5 (guardrails),
    // 6 (history), 7 (volumes), 8 (snapshots) and 9 (volume and snapshot quotas, in org_guardrails) added,
    // and those of the later versions (E2B tokens, the console, secrets).
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw,
                         "DROP TABLE snapshots; DROP INDEX sandboxes_live_by_snapshot; "
                         "DROP TRIGGER sandbox_volumes_on_sandbox_deleted; DROP TRIGGER sandbox_volumes_on_sandbox_delete; "
                         "DROP TABLE sandbox_volumes; DROP TABLE volumes; "
                         "DROP TABLE audit_events; DROP TABLE audit_checkpoints; "
                         "DROP TABLE org_guardrails; DROP TABLE sandbox_deadlines; "
                         "DROP TRIGGER sandbox_labels_on_insert; DROP TRIGGER sandbox_labels_on_update; "
                         "DROP TRIGGER sandbox_labels_on_delete; DROP TRIGGER sandbox_deadlines_on_delete; "
                         "DROP TABLE sandbox_labels; DROP INDEX sandboxes_live_by_org; "
                         "DROP INDEX sandboxes_deleted_at; DROP TABLE e2b_access_tokens; DROP TABLE console_sessions; DROP TABLE console_logins; "
                         "DROP TABLE secrets; DROP TABLE interception_cas; DROP TABLE webhooks; DROP TABLE webhook_deliveries; "
                         "PRAGMA user_version = 3",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = open_db(path);
  CHECK(db->schema_version() == migration_count);
  CHECK(org_store(*db).get_org(org_id).ok());
  auto head = audit_store(*db).audit_head_of(org_id);
  REQUIRE(head);
  CHECK(head->seq == 0);
  CHECK(raw_query(path, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'audit%'") == "7");  // 2 tables, 5 indexes
}

TEST_CASE("a version 8 database gains the volume and snapshot quotas at open, its limits stay") {
  testing::temp_dir dir;
  const auto path = dir.file("sandfort.db");
  std::string org_id;
  {
    auto db = open_db(path);
    org_id = make_org(*db, "acme").id;
    org_guardrails g;
    g.org_id = org_id;
    g.max_sandboxes = 3;
    g.max_millicpus = 2500;
    g.stopped_since = t0;
    g.updated_at = t0;
    REQUIRE(guardrail_store(*db).put_org_guardrails(g));
  }
  {
    // Back to version 8: org_guardrails without the two columns version 9 added (nor versions 10's
    // and 12's, nor 15's egress defaults), without the tables of versions 11 (E2B tokens), 13
    // and 14 (console) and 16 (secrets), and without version 17's index of life-cycle events.
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw,
                         "ALTER TABLE org_guardrails DROP COLUMN max_volumes; "
                         "ALTER TABLE org_guardrails DROP COLUMN max_snapshots; "
                         "ALTER TABLE org_guardrails DROP COLUMN max_disk_mb; "
                         "ALTER TABLE org_guardrails DROP COLUMN allowed_runtimes; "
                         "ALTER TABLE org_guardrails DROP COLUMN egress_defaults; "
                         "DROP TABLE e2b_access_tokens; DROP TABLE console_sessions; DROP TABLE console_logins; "
                         "DROP TABLE secrets; DROP TABLE interception_cas; DROP TABLE webhooks; DROP TABLE webhook_deliveries; "
                         "DROP INDEX audit_lifecycle; PRAGMA user_version = 8",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  CHECK(raw_query(path, "SELECT count(*) FROM pragma_table_info('org_guardrails') WHERE name = 'max_volumes'") == "0");
  auto db = open_db(path);
  CHECK(db->schema_version() == migration_count);
  auto g = guardrail_store(*db).get_org_guardrails(org_id);
  REQUIRE(g);
  CHECK(g->max_sandboxes == std::optional<std::int64_t>(3));
  CHECK(g->max_millicpus == std::optional<std::int64_t>(2500));
  CHECK(g->stopped_since == std::optional<std::string>(t0));
  CHECK_FALSE(g->max_volumes);  // the configured default
  CHECK_FALSE(g->max_snapshots);
  CHECK_FALSE(g->max_disk_mb);
  CHECK_FALSE(g->allowed_runtimes_json);
  CHECK_FALSE(g->egress_defaults_json);  // version 15: none

  // The new fields are stored, and null again clears them.
  g->egress_defaults_json = R"({"egress_allowlist":["*"]})";
  g->max_volumes = 2;
  g->max_snapshots = 0;
  g->max_disk_mb = 4096;
  g->allowed_runtimes_json = R"(["gvisor"])";
  REQUIRE(guardrail_store(*db).put_org_guardrails(*g));
  auto again = guardrail_store(*db).get_org_guardrails(org_id);
  REQUIRE(again);
  CHECK(again->max_disk_mb == std::optional<std::int64_t>(4096));
  CHECK(again->allowed_runtimes_json == std::optional<std::string>(R"(["gvisor"])"));
  CHECK(again->egress_defaults_json == std::optional<std::string>(R"({"egress_allowlist":["*"]})"));
  CHECK(again->max_volumes == std::optional<std::int64_t>(2));
  CHECK(again->max_snapshots == std::optional<std::int64_t>(0));
  CHECK(again->max_sandboxes == std::optional<std::int64_t>(3));
  again->max_volumes.reset();
  again->allowed_runtimes_json.reset();
  again->egress_defaults_json.reset();
  REQUIRE(guardrail_store(*db).put_org_guardrails(*again));
  CHECK_FALSE(guardrail_store(*db).get_org_guardrails(org_id)->egress_defaults_json);
  CHECK_FALSE(guardrail_store(*db).get_org_guardrails(org_id)->max_volumes);
  CHECK_FALSE(guardrail_store(*db).get_org_guardrails(org_id)->allowed_runtimes_json);
  CHECK(guardrail_store(*db).get_org_guardrails(org_id)->max_snapshots == std::optional<std::int64_t>(0));
}

namespace {

audit::event_record event_for(const std::string& org_id, std::int64_t seq, const std::string& action) {
  audit::event_record e;
  e.org_id = org_id;
  e.seq = seq;
  e.ts = t0;
  e.actor = "key-0000000000000001";
  e.action = action;
  e.outcome = "ok";
  e.prev_hash = std::string(64, '0');
  e.hash = std::string(64, 'f');
  return e;
}

// Every existing write, then the event that records them, in one transaction.
struct changes_in_one_transaction {
  org a, b;
  sandbox_record kept, created;
  api_key key_a;
  std::string new_org_name = "made-inside";

  void run(database& db) {
    auto changed = kept;
    changed.state = "stopped";
    changed.updated_at = "2026-01-02T00:00:00.000Z";
    REQUIRE(sandbox_store(db).update_sandbox(changed));
    changed.spec_json = R"({"cpu":2})";
    REQUIRE(sandbox_store(db).update_sandbox_spec(changed));
    REQUIRE(sandbox_store(db).insert_sandbox(created));
    REQUIRE(org_store(db).revoke_api_key(a.id, key_a.id, "2026-01-02T00:00:00.000Z"));
    REQUIRE(org_store(db).set_org_state(b.id, "disabled", {"active"}, "2026-01-02T00:00:00.000Z"));
    REQUIRE(org_store(db).revoke_org_keys(b.id, "2026-01-02T00:00:00.000Z"));
    REQUIRE(org_store(db).touch_api_key(key_a.id, "2026-01-02T00:00:00.000Z"));
    REQUIRE(org_store(db).create_org(new_org_name, false, t0));
    REQUIRE(audit_store(db).insert_audit_event(event_for(a.id, 1, "sandbox.create")));
  }

  // All of the changes are there, or none is.
  void check(database& db, bool present) {
    auto got = sandbox_store(db).get_sandbox(a.id, kept.id);
    REQUIRE(got);
    CHECK(got->state == (present ? "stopped" : "started"));
    CHECK(got->spec_json == (present ? R"({"cpu":2})" : R"({"cpu":1})"));
    CHECK(sandbox_store(db).get_sandbox(a.id, created.id).ok() == present);
    auto key_row = org_store(db).find_api_key_by_hash("hash-a");
    REQUIRE(key_row);
    CHECK(key_row->revoked_at.has_value() == present);
    CHECK(key_row->last_used_at.has_value() == present);
    CHECK(org_store(db).get_org(b.id)->state == (present ? "disabled" : "active"));
    CHECK(org_store(db).find_api_key_by_hash("hash-b")->revoked_at.has_value() == present);
    CHECK(org_store(db).find_org_by_name(new_org_name).ok() == present);
    CHECK(audit_store(db).audit_head_of(a.id)->seq == (present ? 1 : 0));
  }
};

changes_in_one_transaction prepare_changes(database& db) {
  changes_in_one_transaction c;
  c.a = make_org(db, "a");
  c.b = make_org(db, "b");
  c.kept = sandbox(c.a.id, "kept");
  REQUIRE(sandbox_store(db).insert_sandbox(c.kept));
  c.created = sandbox(c.a.id, "created");
  c.key_a = key(c.a.id, "ka");
  REQUIRE(org_store(db).insert_api_key(c.key_a, "hash-a"));
  REQUIRE(org_store(db).insert_api_key(key(c.b.id, "kb"), "hash-b"));
  return c;
}

}  // namespace

TEST_CASE("every existing write joins a transaction: all of them with the audit event, or none") {
  testing::temp_dir dir;
  const auto path = dir.file("sandfort.db");
  auto db = open_db(path);
  auto changes = prepare_changes(*db);

  SECTION("destroyed without commit: nothing happened, also for another connection") {
    {
      auto tx = db->begin();
      REQUIRE(tx);
      changes.run(*db);
      changes.check(*db, true);  // visible to the writer meanwhile
    }
    changes.check(*db, false);
    changes.check(*open_db(path), false);
  }
  SECTION("committed: everything, also for another connection") {
    {
      auto tx = db->begin();
      REQUIRE(tx);
      changes.run(*db);
      REQUIRE(tx->commit());
    }
    changes.check(*db, true);
    changes.check(*open_db(path), true);
  }
  SECTION("a failed statement inside does not end the transaction; the caller decides") {
    auto tx = db->begin();
    REQUIRE(tx);
    REQUIRE(sandbox_store(*db).insert_sandbox(changes.created));
    auto dup = sandbox_store(*db).insert_sandbox(changes.created);
    REQUIRE_FALSE(dup);
    CHECK(dup.err().code == errc::conflict);
    REQUIRE(tx->commit());
    CHECK(sandbox_store(*db).get_sandbox(changes.a.id, changes.created.id).ok());
  }
}
