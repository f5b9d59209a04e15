#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "sandfort/core/ids.hpp"
#include "sandfort/store/database.hpp"
#include "temp_dir.hpp"
#include "open_db.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

namespace {

constexpr int migration_count = 10;

org make_org(database& db, const std::string& name) {
  auto o = db.create_org(name, false, t0);
  REQUIRE(o);
  return *o;
}

sandbox_record sandbox(const std::string& org_id, const std::string& name, const std::string& state = "started") {
  sandbox_record s;
  s.id = new_id("sbx-");
  s.org_id = org_id;
  s.name = name;
  s.state = state;
  s.snapshot = "ubuntu:24.04";
  s.spec_json = R"({"cpu":1})";
  s.created_at = t0;
  s.updated_at = t0;
  return s;
}

api_key key(const std::string& org_id, const std::string& name) {
  api_key k;
  k.id = new_id("key-");
  k.org_id = org_id;
  k.name = name;
  k.role = "member";
  k.created_at = t0;
  return k;
}

// Runs one query on the file behind the store's back and returns the first column of the first row.
std::string raw_query(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr)
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

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
    auto orgs = db->list_orgs();
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
  auto blocked = db->create_org("while-locked", false, t0);
  REQUIRE_FALSE(blocked.ok());
  CHECK(blocked.err().code == errc::unavailable);
  // Readers are not blocked by a writer in WAL mode.
  CHECK(db->ping().ok());
  REQUIRE(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  CHECK(db->create_org("after", false, t0).ok());
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

TEST_CASE("organizations: create, duplicate name, get, find, list") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto acme = db->create_org("acme", false, t0);
  REQUIRE(acme);
  CHECK(is_id(acme->id, "org-"));
  CHECK(acme->name == "acme");
  CHECK_FALSE(acme->superadmin);
  CHECK(acme->created_at == t0);

  auto dup = db->create_org("acme", true, t0);
  REQUIRE_FALSE(dup);
  CHECK(dup.err().code == errc::conflict);
  CHECK(dup.err().message == "organization name 'acme' is taken");

  auto root = db->create_org("root", true, t0);
  REQUIRE(root);

  auto got = db->get_org(acme->id);
  REQUIRE(got);
  CHECK(got->name == "acme");
  auto found = db->find_org_by_name("root");
  REQUIRE(found);
  CHECK(found->id == root->id);
  CHECK(found->superadmin);

  auto missing = db->get_org("org-0000000000000000");
  REQUIRE_FALSE(missing);
  CHECK(missing.err().code == errc::not_found);
  CHECK(db->find_org_by_name("nobody").err().code == errc::not_found);

  auto all = db->list_orgs();
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].name == "acme");
  CHECK((*all)[1].name == "root");
}

TEST_CASE("API keys: insert, find by hash, list per organization, revoke") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");

  auto ka = key(a.id, "ci");
  ka.expires_at = "2027-01-01T00:00:00.000Z";
  REQUIRE(db->insert_api_key(ka, std::string(64, 'a')));
  auto kb = key(b.id, "laptop");
  REQUIRE(db->insert_api_key(kb, std::string(64, 'b')));

  SECTION("the same hash twice is a conflict") {
    auto dup = db->insert_api_key(key(a.id, "again"), std::string(64, 'a'));
    REQUIRE_FALSE(dup);
    CHECK(dup.err().code == errc::conflict);
  }
  SECTION("a key for an organization that does not exist is refused") {
    auto orphan = db->insert_api_key(key("org-0000000000000000", "x"), std::string(64, 'c'));
    REQUIRE_FALSE(orphan);
    CHECK(orphan.err().code == errc::not_found);
  }
  SECTION("an unknown role is refused by the schema") {
    auto bad = key(a.id, "x");
    bad.role = "owner";
    auto r = db->insert_api_key(bad, std::string(64, 'd'));
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::internal);
  }
  SECTION("working keys are counted per organization: revoked and expired ones are not") {
    CHECK(db->count_working_api_keys(a.id, "2026-06-01T00:00:00.000Z").value() == 1);
    CHECK(db->count_working_api_keys(a.id, "2027-01-01T00:00:00.000Z").value() == 0);  // expired at that instant
    CHECK(db->count_working_api_keys(b.id, "2099-01-01T00:00:00.000Z").value() == 1);  // never expires
    REQUIRE(db->revoke_api_key(b.id, kb.id, t0));
    CHECK(db->count_working_api_keys(b.id, "2026-06-01T00:00:00.000Z").value() == 0);
    CHECK(db->count_working_api_keys("org-0000000000000000", t0).value() == 0);
  }
  SECTION("found by hash with every field") {
    auto found = db->find_api_key_by_hash(std::string(64, 'a'));
    REQUIRE(found);
    CHECK(found->id == ka.id);
    CHECK(found->org_id == a.id);
    CHECK(found->name == "ci");
    CHECK(found->role == "member");
    CHECK(found->created_at == t0);
    CHECK(found->expires_at == ka.expires_at);
    CHECK_FALSE(found->revoked_at);
    CHECK(db->find_api_key_by_hash(std::string(64, 'e')).err().code == errc::not_found);
  }
  SECTION("listed per organization") {
    auto list_a = db->list_api_keys(a.id);
    REQUIRE(list_a);
    REQUIRE(list_a->size() == 1);
    CHECK((*list_a)[0].id == ka.id);
    auto list_b = db->list_api_keys(b.id);
    REQUIRE(list_b);
    REQUIRE(list_b->size() == 1);
    CHECK((*list_b)[0].id == kb.id);
  }
  SECTION("revoked once, in its own organization only") {
    auto other = db->revoke_api_key(b.id, ka.id, t0);
    REQUIRE_FALSE(other);
    CHECK(other.err().code == errc::not_found);
    CHECK_FALSE(db->find_api_key_by_hash(std::string(64, 'a'))->revoked_at);

    REQUIRE(db->revoke_api_key(a.id, ka.id, "2026-02-01T00:00:00.000Z"));
    auto found = db->find_api_key_by_hash(std::string(64, 'a'));
    REQUIRE(found);
    CHECK(found->revoked_at == std::optional<std::string>("2026-02-01T00:00:00.000Z"));
    auto listed = db->list_api_keys(a.id);
    REQUIRE(listed);
    REQUIRE(listed->size() == 1);
    CHECK((*listed)[0].revoked_at);

    auto twice = db->revoke_api_key(a.id, ka.id, t0);
    REQUIRE_FALSE(twice);
    CHECK(twice.err().code == errc::not_found);
    CHECK(db->revoke_api_key(a.id, "key-0000000000000000", t0).err().code == errc::not_found);
  }
}

TEST_CASE("sandboxes: insert and get by id or by name") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto named = sandbox(a.id, "web");
  named.expires_at = "2026-01-02T00:00:00.000Z";
  named.container_id = "c0ffee";
  REQUIRE(db->insert_sandbox(named));
  auto unnamed = sandbox(a.id, "");
  REQUIRE(db->insert_sandbox(unnamed));

  auto by_id = db->get_sandbox(a.id, named.id);
  REQUIRE(by_id);
  CHECK(by_id->id == named.id);
  CHECK(by_id->org_id == a.id);
  CHECK(by_id->name == "web");
  CHECK(by_id->state == "started");
  CHECK(by_id->snapshot == "ubuntu:24.04");
  CHECK(by_id->spec_json == R"({"cpu":1})");
  CHECK(by_id->container_id == "c0ffee");
  CHECK(by_id->error_message.empty());
  CHECK(by_id->created_at == t0);
  CHECK(by_id->updated_at == t0);
  CHECK(by_id->expires_at == named.expires_at);

  auto by_name = db->get_sandbox(a.id, "web");
  REQUIRE(by_name);
  CHECK(by_name->id == named.id);

  auto anon = db->get_sandbox(a.id, unnamed.id);
  REQUIRE(anon);
  CHECK(anon->name.empty());
  CHECK_FALSE(anon->expires_at);
  CHECK(raw_query(dir.file("s.db"), "SELECT count(*) FROM sandboxes WHERE name IS NULL") == "1");

  auto missing = db->get_sandbox(a.id, "nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.err().code == errc::not_found);
  CHECK(missing.err().message == "sandbox nope not found");
  // The empty string is not the name of the unnamed sandbox.
  CHECK(db->get_sandbox(a.id, "").err().code == errc::not_found);

  auto orphan = db->insert_sandbox(sandbox("org-0000000000000000", "x"));
  REQUIRE_FALSE(orphan);
  CHECK(orphan.err().code == errc::not_found);
}

TEST_CASE("an organization never sees another's sandboxes") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  auto s = sandbox(a.id, "secret-project");
  REQUIRE(db->insert_sandbox(s));

  CHECK(db->get_sandbox(b.id, s.id).err().code == errc::not_found);
  CHECK(db->get_sandbox(b.id, "secret-project").err().code == errc::not_found);

  auto listed = db->list_sandboxes(b.id, {});
  REQUIRE(listed);
  CHECK(listed->empty());
  auto listed_stopped = db->list_sandboxes(b.id, sandbox_filter{"started", "", 100, {}});
  REQUIRE(listed_stopped);
  CHECK(listed_stopped->empty());

  auto hijack = s;
  hijack.org_id = b.id;
  hijack.state = "stopped";
  auto updated = db->update_sandbox(hijack);
  REQUIRE_FALSE(updated);
  CHECK(updated.err().code == errc::not_found);
  auto still = db->get_sandbox(a.id, s.id);
  REQUIRE(still);
  CHECK(still->state == "started");
}

TEST_CASE("sandbox names are unique per organization among live sandboxes") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  auto first = sandbox(a.id, "web");
  REQUIRE(db->insert_sandbox(first));

  auto dup = db->insert_sandbox(sandbox(a.id, "web"));
  REQUIRE_FALSE(dup);
  CHECK(dup.err().code == errc::conflict);
  CHECK(dup.err().message == "sandbox name 'web' is already used");

  CHECK(db->insert_sandbox(sandbox(b.id, "web")));
  // Unnamed sandboxes never collide.
  CHECK(db->insert_sandbox(sandbox(a.id, "")));
  CHECK(db->insert_sandbox(sandbox(a.id, "")));

  first.state = "deleted";
  first.updated_at = "2026-01-01T01:00:00.000Z";
  REQUIRE(db->update_sandbox(first));
  CHECK(db->get_sandbox(a.id, first.id).err().code == errc::not_found);
  auto second = sandbox(a.id, "web");
  REQUIRE(db->insert_sandbox(second));
  auto got = db->get_sandbox(a.id, "web");
  REQUIRE(got);
  CHECK(got->id == second.id);

  // A deleted row is final: it cannot come back, whether or not its name is in use.
  first.state = "started";
  auto revived = db->update_sandbox(first);
  REQUIRE_FALSE(revived);
  CHECK(revived.err().code == errc::not_found);
}

TEST_CASE("listing sandboxes filters by state and pages by id") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  std::vector<std::string> started_ids;
  for (int i = 0; i < 5; ++i) {
    auto s = sandbox(a.id, "s" + std::to_string(i), i % 2 == 0 ? "started" : "stopped");
    REQUIRE(db->insert_sandbox(s));
    if (i % 2 == 0) started_ids.push_back(s.id);
  }
  REQUIRE(db->insert_sandbox(sandbox(a.id, "gone", "deleted")));
  std::sort(started_ids.begin(), started_ids.end());

  auto all = db->list_sandboxes(a.id, {});
  REQUIRE(all);
  CHECK(all->size() == 5);
  CHECK(std::is_sorted(all->begin(), all->end(), [](auto& x, auto& y) { return x.id < y.id; }));

  auto started = db->list_sandboxes(a.id, sandbox_filter{"started", "", 100, {}});
  REQUIRE(started);
  REQUIRE(started->size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK((*started)[i].id == started_ids[i]);

  auto deleted = db->list_sandboxes(a.id, sandbox_filter{"deleted", "", 100, {}});
  REQUIRE(deleted);
  REQUIRE(deleted->size() == 1);
  CHECK((*deleted)[0].name == "gone");

  // Pages of two over the five live ones: 2 + 2 + 1, no overlap, no gap.
  std::vector<std::string> seen;
  std::string cursor;
  for (int page = 0; page < 4; ++page) {
    auto got = db->list_sandboxes(a.id, sandbox_filter{"", cursor, 2, {}});
    REQUIRE(got);
    if (got->empty()) break;
    CHECK(got->size() <= 2);
    for (auto& s : *got) seen.push_back(s.id);
    cursor = got->back().id;
  }
  REQUIRE(seen.size() == 5);
  for (std::size_t i = 0; i < 5; ++i) CHECK(seen[i] == (*all)[i].id);

  auto page2 = db->list_sandboxes(a.id, sandbox_filter{"started", started_ids[0], 1, {}});
  REQUIRE(page2);
  REQUIRE(page2->size() == 1);
  CHECK((*page2)[0].id == started_ids[1]);
}

TEST_CASE("update_sandbox changes state, container and error") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto s = sandbox(a.id, "job", "creating");
  REQUIRE(db->insert_sandbox(s));

  s.state = "error";
  s.container_id = "abc123";
  s.error_message = "image pull failed";
  s.updated_at = "2026-01-01T00:05:00.000Z";
  s.snapshot = "ignored:latest";  // not an updatable column
  REQUIRE(db->update_sandbox(s));

  auto got = db->get_sandbox(a.id, s.id);
  REQUIRE(got);
  CHECK(got->state == "error");
  CHECK(got->container_id == "abc123");
  CHECK(got->error_message == "image pull failed");
  CHECK(got->updated_at == "2026-01-01T00:05:00.000Z");
  CHECK(got->created_at == t0);
  CHECK(got->snapshot == "ubuntu:24.04");

  auto absent = sandbox(a.id, "never-inserted");
  CHECK(db->update_sandbox(absent).err().code == errc::not_found);
}

TEST_CASE("network columns: credential hash, preview key and address; spec updates apart from state") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto s = sandbox(a.id, "net", "started");
  s.proxy_secret_sha256 = "ab12";
  s.preview_key = "k3y";
  REQUIRE(db->insert_sandbox(s));

  // Found without an organization (the proxy and the preview router have none).
  auto found = db->find_live_sandbox(s.id);
  REQUIRE(found);
  CHECK(found->org_id == a.id);
  CHECK(found->proxy_secret_sha256 == "ab12");
  CHECK(found->preview_key == "k3y");
  CHECK(found->address.empty());

  s.address = "10.213.0.7";
  REQUIRE(db->update_sandbox(s));
  CHECK(db->find_live_sandbox(s.id)->address == "10.213.0.7");

  // A spec update leaves the state alone, and a state update leaves the spec alone.
  auto patch = *found;
  patch.spec_json = R"({"egress_allowlist":["x.org"]})";
  patch.expires_at = "2026-02-01T00:00:00.000Z";
  patch.state = "ignored";
  REQUIRE(db->update_sandbox_spec(patch));
  s.state = "stopped";
  REQUIRE(db->update_sandbox(s));
  auto got = db->find_live_sandbox(s.id);
  CHECK(got->state == "stopped");
  CHECK(got->spec_json == patch.spec_json);
  CHECK(got->expires_at == patch.expires_at);

  s.state = "deleted";
  REQUIRE(db->update_sandbox(s));
  CHECK(db->find_live_sandbox(s.id).err().code == errc::not_found);
  CHECK(db->update_sandbox_spec(patch).err().code == errc::not_found);
}

TEST_CASE("list_live_sandboxes_all_orgs spans organizations and skips deleted rows") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  REQUIRE(db->insert_sandbox(sandbox(a.id, "one")));
  REQUIRE(db->insert_sandbox(sandbox(b.id, "two", "stopped")));
  REQUIRE(db->insert_sandbox(sandbox(b.id, "three", "deleted")));

  auto live = db->list_live_sandboxes_all_orgs();
  REQUIRE(live);
  REQUIRE(live->size() == 2);
  for (auto& s : *live) CHECK(s.state != "deleted");
  CHECK(((*live)[0].org_id == a.id || (*live)[1].org_id == a.id));
  CHECK(((*live)[0].org_id == b.id || (*live)[1].org_id == b.id));
}

TEST_CASE("text is stored as given, quotes and all") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto o = db->create_org("o'brien; DROP TABLE orgs; --", false, t0);
  REQUIRE(o);
  auto found = db->find_org_by_name("o'brien; DROP TABLE orgs; --");
  REQUIRE(found);
  CHECK(found->id == o->id);
}

TEST_CASE("organizations move through their life cycle only along its edges") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("sandfort.db"));
  auto o = make_org(*db, "acme");
  CHECK(o.state == "active");
  CHECK_FALSE(o.state_changed_at);

  REQUIRE(db->set_org_state(o.id, "disabled", {"active"}, "2026-01-02T00:00:00.000Z"));
  auto got = db->get_org(o.id);
  REQUIRE(got);
  CHECK(got->state == "disabled");
  CHECK(got->state_changed_at == std::optional<std::string>("2026-01-02T00:00:00.000Z"));
  // Not from a state that is not listed.
  auto wrong = db->set_org_state(o.id, "deleted", {"deleting"}, t0);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.err().code == errc::conflict);
  CHECK(db->set_org_state("org-0000000000000000", "disabled", {"active"}, t0).err().code == errc::not_found);
  // The schema refuses a state that does not exist.
  CHECK_FALSE(db->set_org_state(o.id, "frozen", {"disabled"}, t0));

  REQUIRE(db->set_org_state(o.id, "deleting", {"active", "disabled"}, t0));
  REQUIRE(db->set_org_state(o.id, "deleted", {"deleting"}, t0));
  auto listed = db->list_orgs();
  REQUIRE(listed);
  CHECK(std::none_of(listed->begin(), listed->end(), [&](const org& x) { return x.id == o.id; }));
  // The name stays taken by the deleted row.
  CHECK(db->create_org("acme", false, t0).err().code == errc::conflict);
}

TEST_CASE("an organization's keys are revoked together; a key records its last use") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("sandfort.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  auto add_key = [&](const std::string& org_id, const std::string& id) {
    api_key k{id, org_id, "k", "member", t0, std::nullopt, std::nullopt, std::nullopt};
    REQUIRE(db->insert_api_key(k, "hash-" + id));
  };
  add_key(a.id, "key-a1");
  add_key(a.id, "key-a2");
  add_key(b.id, "key-b1");
  REQUIRE(db->revoke_api_key(a.id, "key-a2", t0));
  auto revoked = db->revoke_org_keys(a.id, "2026-01-03T00:00:00.000Z");
  REQUIRE(revoked);
  CHECK(*revoked == 1);  // the one already revoked keeps its time
  CHECK(db->find_api_key_by_hash("hash-key-a1")->revoked_at == std::optional<std::string>("2026-01-03T00:00:00.000Z"));
  CHECK(db->find_api_key_by_hash("hash-key-a2")->revoked_at == std::optional<std::string>(t0));
  CHECK_FALSE(db->find_api_key_by_hash("hash-key-b1")->revoked_at);

  CHECK_FALSE(db->find_api_key_by_hash("hash-key-b1")->last_used_at);
  REQUIRE(db->touch_api_key("key-b1", "2026-01-04T00:00:00.000Z"));
  CHECK(db->find_api_key_by_hash("hash-key-b1")->last_used_at == std::optional<std::string>("2026-01-04T00:00:00.000Z"));
}

TEST_CASE("a version 3 database gains the audit tables at open and keeps its rows") {
  testing::temp_dir dir;
  const auto path = dir.file("sandfort.db");
  std::string org_id;
  { org_id = make_org(*open_db(path), "acme").id; }
  {
    // Back to the schema as version 3 shipped it: without what versions 4 (audit), 5 (guardrails),
    // 6 (history), 7 (volumes), 8 (snapshots) and 9 (volume and snapshot quotas, in org_guardrails) added.
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
                         "DROP INDEX sandboxes_deleted_at; PRAGMA user_version = 3",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = open_db(path);
  CHECK(db->schema_version() == migration_count);
  CHECK(db->get_org(org_id).ok());
  auto head = db->audit_head_of(org_id);
  REQUIRE(head);
  CHECK(head->seq == 0);
  CHECK(raw_query(path, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'audit%'") == "6");
}

TEST_CASE("a version 8 database gains the volume and snapshot quotas at open; its limits stay") {
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
    REQUIRE(db->put_org_guardrails(g));
  }
  {
    // Back to version 8: org_guardrails without the two columns version 9 added (nor version 10's).
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw,
                         "ALTER TABLE org_guardrails DROP COLUMN max_volumes; "
                         "ALTER TABLE org_guardrails DROP COLUMN max_snapshots; "
                         "ALTER TABLE org_guardrails DROP COLUMN max_disk_mb; PRAGMA user_version = 8",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  CHECK(raw_query(path, "SELECT count(*) FROM pragma_table_info('org_guardrails') WHERE name = 'max_volumes'") == "0");
  auto db = open_db(path);
  CHECK(db->schema_version() == migration_count);
  auto g = db->get_org_guardrails(org_id);
  REQUIRE(g);
  CHECK(g->max_sandboxes == std::optional<std::int64_t>(3));
  CHECK(g->max_millicpus == std::optional<std::int64_t>(2500));
  CHECK(g->stopped_since == std::optional<std::string>(t0));
  CHECK_FALSE(g->max_volumes);  // the configured default
  CHECK_FALSE(g->max_snapshots);
  CHECK_FALSE(g->max_disk_mb);

  // The new fields are stored, and null again clears them.
  g->max_volumes = 2;
  g->max_snapshots = 0;
  g->max_disk_mb = 4096;
  REQUIRE(db->put_org_guardrails(*g));
  auto again = db->get_org_guardrails(org_id);
  REQUIRE(again);
  CHECK(again->max_disk_mb == std::optional<std::int64_t>(4096));
  CHECK(again->max_volumes == std::optional<std::int64_t>(2));
  CHECK(again->max_snapshots == std::optional<std::int64_t>(0));
  CHECK(again->max_sandboxes == std::optional<std::int64_t>(3));
  again->max_volumes.reset();
  REQUIRE(db->put_org_guardrails(*again));
  CHECK_FALSE(db->get_org_guardrails(org_id)->max_volumes);
  CHECK(db->get_org_guardrails(org_id)->max_snapshots == std::optional<std::int64_t>(0));
}

namespace {

audit_event event_for(const std::string& org_id, std::int64_t seq, const std::string& action) {
  audit_event e;
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
    REQUIRE(db.update_sandbox(changed));
    changed.spec_json = R"({"cpu":2})";
    REQUIRE(db.update_sandbox_spec(changed));
    REQUIRE(db.insert_sandbox(created));
    REQUIRE(db.revoke_api_key(a.id, key_a.id, "2026-01-02T00:00:00.000Z"));
    REQUIRE(db.set_org_state(b.id, "disabled", {"active"}, "2026-01-02T00:00:00.000Z"));
    REQUIRE(db.revoke_org_keys(b.id, "2026-01-02T00:00:00.000Z"));
    REQUIRE(db.touch_api_key(key_a.id, "2026-01-02T00:00:00.000Z"));
    REQUIRE(db.create_org(new_org_name, false, t0));
    REQUIRE(db.insert_audit_event(event_for(a.id, 1, "sandbox.create")));
  }

  // All of the changes are there, or none is.
  void check(database& db, bool present) {
    auto got = db.get_sandbox(a.id, kept.id);
    REQUIRE(got);
    CHECK(got->state == (present ? "stopped" : "started"));
    CHECK(got->spec_json == (present ? R"({"cpu":2})" : R"({"cpu":1})"));
    CHECK(db.get_sandbox(a.id, created.id).ok() == present);
    auto key_row = db.find_api_key_by_hash("hash-a");
    REQUIRE(key_row);
    CHECK(key_row->revoked_at.has_value() == present);
    CHECK(key_row->last_used_at.has_value() == present);
    CHECK(db.get_org(b.id)->state == (present ? "disabled" : "active"));
    CHECK(db.find_api_key_by_hash("hash-b")->revoked_at.has_value() == present);
    CHECK(db.find_org_by_name(new_org_name).ok() == present);
    CHECK(db.audit_head_of(a.id)->seq == (present ? 1 : 0));
  }
};

changes_in_one_transaction prepare_changes(database& db) {
  changes_in_one_transaction c;
  c.a = make_org(db, "a");
  c.b = make_org(db, "b");
  c.kept = sandbox(c.a.id, "kept");
  REQUIRE(db.insert_sandbox(c.kept));
  c.created = sandbox(c.a.id, "created");
  c.key_a = key(c.a.id, "ka");
  REQUIRE(db.insert_api_key(c.key_a, "hash-a"));
  REQUIRE(db.insert_api_key(key(c.b.id, "kb"), "hash-b"));
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
    REQUIRE(db->insert_sandbox(changes.created));
    auto dup = db->insert_sandbox(changes.created);
    REQUIRE_FALSE(dup);
    CHECK(dup.err().code == errc::conflict);
    REQUIRE(tx->commit());
    CHECK(db->get_sandbox(changes.a.id, changes.created.id).ok());
  }
}
