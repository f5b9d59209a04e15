// Sandboxes in the store (store/sandbox_store.hpp): names, lists, updates, daemon-wide lookups.
#include <algorithm>
#include <catch2/catch.hpp>

#include "sandfort/core/ids.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"
#include "temp_dir.hpp"
#include "open_db.hpp"
#include "rows.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

TEST_CASE("sandboxes: insert and get by id or by name") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto named = sandbox(a.id, "web");
  named.expires_at = "2026-01-02T00:00:00.000Z";
  named.container_id = "c0ffee";
  REQUIRE(sandbox_store(*db).insert_sandbox(named));
  auto unnamed = sandbox(a.id, "");
  REQUIRE(sandbox_store(*db).insert_sandbox(unnamed));

  auto by_id = sandbox_store(*db).get_sandbox(a.id, named.id);
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

  auto by_name = sandbox_store(*db).get_sandbox(a.id, "web");
  REQUIRE(by_name);
  CHECK(by_name->id == named.id);

  auto anon = sandbox_store(*db).get_sandbox(a.id, unnamed.id);
  REQUIRE(anon);
  CHECK(anon->name.empty());
  CHECK_FALSE(anon->expires_at);
  CHECK(raw_query(dir.file("s.db"), "SELECT count(*) FROM sandboxes WHERE name IS NULL") == "1");

  auto missing = sandbox_store(*db).get_sandbox(a.id, "nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.err().code == errc::not_found);
  CHECK(missing.err().message == "sandbox nope not found");
  // The empty string is not the name of the unnamed sandbox.
  CHECK(sandbox_store(*db).get_sandbox(a.id, "").err().code == errc::not_found);

  auto orphan = sandbox_store(*db).insert_sandbox(sandbox("org-0000000000000000", "x"));
  REQUIRE_FALSE(orphan);
  CHECK(orphan.err().code == errc::not_found);
}

TEST_CASE("an organization never sees another's sandboxes") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  auto s = sandbox(a.id, "secret-project");
  REQUIRE(sandbox_store(*db).insert_sandbox(s));

  CHECK(sandbox_store(*db).get_sandbox(b.id, s.id).err().code == errc::not_found);
  CHECK(sandbox_store(*db).get_sandbox(b.id, "secret-project").err().code == errc::not_found);

  auto listed = sandbox_store(*db).list_sandboxes(b.id, {});
  REQUIRE(listed);
  CHECK(listed->empty());
  auto listed_stopped = sandbox_store(*db).list_sandboxes(b.id, sandbox_filter{"started", "", 100, {}});
  REQUIRE(listed_stopped);
  CHECK(listed_stopped->empty());

  auto hijack = s;
  hijack.org_id = b.id;
  hijack.state = "stopped";
  auto updated = sandbox_store(*db).update_sandbox(hijack);
  REQUIRE_FALSE(updated);
  CHECK(updated.err().code == errc::not_found);
  auto still = sandbox_store(*db).get_sandbox(a.id, s.id);
  REQUIRE(still);
  CHECK(still->state == "started");
}

TEST_CASE("sandbox names are unique per organization among live sandboxes") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  auto first = sandbox(a.id, "web");
  REQUIRE(sandbox_store(*db).insert_sandbox(first));

  auto dup = sandbox_store(*db).insert_sandbox(sandbox(a.id, "web"));
  REQUIRE_FALSE(dup);
  CHECK(dup.err().code == errc::conflict);
  CHECK(dup.err().message == "sandbox name 'web' is already used");

  CHECK(sandbox_store(*db).insert_sandbox(sandbox(b.id, "web")));
  // Unnamed sandboxes never collide.
  CHECK(sandbox_store(*db).insert_sandbox(sandbox(a.id, "")));
  CHECK(sandbox_store(*db).insert_sandbox(sandbox(a.id, "")));

  first.state = "deleted";
  first.updated_at = "2026-01-01T01:00:00.000Z";
  REQUIRE(sandbox_store(*db).update_sandbox(first));
  CHECK(sandbox_store(*db).get_sandbox(a.id, first.id).err().code == errc::not_found);
  auto second = sandbox(a.id, "web");
  REQUIRE(sandbox_store(*db).insert_sandbox(second));
  auto got = sandbox_store(*db).get_sandbox(a.id, "web");
  REQUIRE(got);
  CHECK(got->id == second.id);

  // A deleted row is final: it cannot come back, whether or not its name is in use.
  first.state = "started";
  auto revived = sandbox_store(*db).update_sandbox(first);
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
    REQUIRE(sandbox_store(*db).insert_sandbox(s));
    if (i % 2 == 0) started_ids.push_back(s.id);
  }
  REQUIRE(sandbox_store(*db).insert_sandbox(sandbox(a.id, "gone", "deleted")));
  std::sort(started_ids.begin(), started_ids.end());

  auto all = sandbox_store(*db).list_sandboxes(a.id, {});
  REQUIRE(all);
  CHECK(all->size() == 5);
  CHECK(std::is_sorted(all->begin(), all->end(), [](auto& x, auto& y) { return x.id < y.id; }));

  auto started = sandbox_store(*db).list_sandboxes(a.id, sandbox_filter{"started", "", 100, {}});
  REQUIRE(started);
  REQUIRE(started->size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK((*started)[i].id == started_ids[i]);

  auto deleted = sandbox_store(*db).list_sandboxes(a.id, sandbox_filter{"deleted", "", 100, {}});
  REQUIRE(deleted);
  REQUIRE(deleted->size() == 1);
  CHECK((*deleted)[0].name == "gone");

  // Pages of two over the five live ones: 2 + 2 + 1, no overlap, no gap.
  std::vector<std::string> seen;
  std::string cursor;
  for (int page = 0; page < 4; ++page) {
    auto got = sandbox_store(*db).list_sandboxes(a.id, sandbox_filter{"", cursor, 2, {}});
    REQUIRE(got);
    if (got->empty()) break;
    CHECK(got->size() <= 2);
    for (auto& s : *got) seen.push_back(s.id);
    cursor = got->back().id;
  }
  REQUIRE(seen.size() == 5);
  for (std::size_t i = 0; i < 5; ++i) CHECK(seen[i] == (*all)[i].id);

  auto page2 = sandbox_store(*db).list_sandboxes(a.id, sandbox_filter{"started", started_ids[0], 1, {}});
  REQUIRE(page2);
  REQUIRE(page2->size() == 1);
  CHECK((*page2)[0].id == started_ids[1]);
}

TEST_CASE("update_sandbox changes state, container and error") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto s = sandbox(a.id, "job", "creating");
  REQUIRE(sandbox_store(*db).insert_sandbox(s));

  s.state = "error";
  s.container_id = "abc123";
  s.error_message = "image pull failed";
  s.updated_at = "2026-01-01T00:05:00.000Z";
  s.snapshot = "ignored:latest";  // not an updatable column
  REQUIRE(sandbox_store(*db).update_sandbox(s));

  auto got = sandbox_store(*db).get_sandbox(a.id, s.id);
  REQUIRE(got);
  CHECK(got->state == "error");
  CHECK(got->container_id == "abc123");
  CHECK(got->error_message == "image pull failed");
  CHECK(got->updated_at == "2026-01-01T00:05:00.000Z");
  CHECK(got->created_at == t0);
  CHECK(got->snapshot == "ubuntu:24.04");

  auto absent = sandbox(a.id, "never-inserted");
  CHECK(sandbox_store(*db).update_sandbox(absent).err().code == errc::not_found);
}

TEST_CASE("network columns: credential hash, preview key and address, spec updates apart from state") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto s = sandbox(a.id, "net", "started");
  s.proxy_secret_sha256 = "ab12";
  s.preview_key = "k3y";
  REQUIRE(sandbox_store(*db).insert_sandbox(s));

  // Found without an organization (the proxy and the preview router have none).
  auto found = sandbox_store(*db).find_live_sandbox(s.id);
  REQUIRE(found);
  CHECK(found->org_id == a.id);
  CHECK(found->proxy_secret_sha256 == "ab12");
  CHECK(found->preview_key == "k3y");
  CHECK(found->address.empty());

  s.address = "10.213.0.7";
  REQUIRE(sandbox_store(*db).update_sandbox(s));
  CHECK(sandbox_store(*db).find_live_sandbox(s.id)->address == "10.213.0.7");

  // A spec update leaves the state alone, and a state update leaves the spec alone.
  auto patch = *found;
  patch.spec_json = R"({"egress_allowlist":["x.org"]})";
  patch.expires_at = "2026-02-01T00:00:00.000Z";
  patch.state = "ignored";
  REQUIRE(sandbox_store(*db).update_sandbox_spec(patch));
  s.state = "stopped";
  REQUIRE(sandbox_store(*db).update_sandbox(s));
  auto got = sandbox_store(*db).find_live_sandbox(s.id);
  CHECK(got->state == "stopped");
  CHECK(got->spec_json == patch.spec_json);
  CHECK(got->expires_at == patch.expires_at);

  s.state = "deleted";
  REQUIRE(sandbox_store(*db).update_sandbox(s));
  CHECK(sandbox_store(*db).find_live_sandbox(s.id).err().code == errc::not_found);
  CHECK(sandbox_store(*db).update_sandbox_spec(patch).err().code == errc::not_found);
}

TEST_CASE("list_live_sandboxes_all_orgs spans organizations and skips deleted rows") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  REQUIRE(sandbox_store(*db).insert_sandbox(sandbox(a.id, "one")));
  REQUIRE(sandbox_store(*db).insert_sandbox(sandbox(b.id, "two", "stopped")));
  REQUIRE(sandbox_store(*db).insert_sandbox(sandbox(b.id, "three", "deleted")));

  auto live = sandbox_store(*db).list_live_sandboxes_all_orgs();
  REQUIRE(live);
  REQUIRE(live->size() == 2);
  for (auto& s : *live) CHECK(s.state != "deleted");
  CHECK(((*live)[0].org_id == a.id || (*live)[1].org_id == a.id));
  CHECK(((*live)[0].org_id == b.id || (*live)[1].org_id == b.id));
}
