// Organizations and API keys in the store (store/org_store.hpp).
#include <catch2/catch.hpp>

#include "sandfort/core/ids.hpp"
#include "sandfort/store/org_store.hpp"
#include "temp_dir.hpp"
#include "open_db.hpp"
#include "rows.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

TEST_CASE("organizations: create, duplicate name, get, find, list") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto acme = org_store(*db).create_org("acme", false, t0);
  REQUIRE(acme);
  CHECK(is_id(acme->id, "org-"));
  CHECK(acme->name == "acme");
  CHECK_FALSE(acme->superadmin);
  CHECK(acme->created_at == t0);

  auto dup = org_store(*db).create_org("acme", true, t0);
  REQUIRE_FALSE(dup);
  CHECK(dup.err().code == errc::conflict);
  CHECK(dup.err().message == "organization name 'acme' is taken");

  auto root = org_store(*db).create_org("root", true, t0);
  REQUIRE(root);

  auto got = org_store(*db).get_org(acme->id);
  REQUIRE(got);
  CHECK(got->name == "acme");
  auto found = org_store(*db).find_org_by_name("root");
  REQUIRE(found);
  CHECK(found->id == root->id);
  CHECK(found->superadmin);

  auto missing = org_store(*db).get_org("org-0000000000000000");
  REQUIRE_FALSE(missing);
  CHECK(missing.err().code == errc::not_found);
  CHECK(org_store(*db).find_org_by_name("nobody").err().code == errc::not_found);

  auto all = org_store(*db).list_orgs();
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
  REQUIRE(org_store(*db).insert_api_key(ka, std::string(64, 'a')));
  auto kb = key(b.id, "laptop");
  REQUIRE(org_store(*db).insert_api_key(kb, std::string(64, 'b')));

  SECTION("the same hash twice is a conflict") {
    auto dup = org_store(*db).insert_api_key(key(a.id, "again"), std::string(64, 'a'));
    REQUIRE_FALSE(dup);
    CHECK(dup.err().code == errc::conflict);
  }
  SECTION("a key for an organization that does not exist is refused") {
    auto orphan = org_store(*db).insert_api_key(key("org-0000000000000000", "x"), std::string(64, 'c'));
    REQUIRE_FALSE(orphan);
    CHECK(orphan.err().code == errc::not_found);
  }
  SECTION("an unknown role is refused by the schema") {
    auto bad = key(a.id, "x");
    bad.role = "owner";
    auto r = org_store(*db).insert_api_key(bad, std::string(64, 'd'));
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::internal);
  }
  SECTION("working keys are counted per organization: revoked and expired ones are not") {
    CHECK(org_store(*db).count_working_api_keys(a.id, "2026-06-01T00:00:00.000Z").value() == 1);
    CHECK(org_store(*db).count_working_api_keys(a.id, "2027-01-01T00:00:00.000Z").value() ==
          0);  // expired at that instant
    CHECK(org_store(*db).count_working_api_keys(b.id, "2099-01-01T00:00:00.000Z").value() == 1);  // never expires
    REQUIRE(org_store(*db).revoke_api_key(b.id, kb.id, t0));
    CHECK(org_store(*db).count_working_api_keys(b.id, "2026-06-01T00:00:00.000Z").value() == 0);
    CHECK(org_store(*db).count_working_api_keys("org-0000000000000000", t0).value() == 0);
  }
  SECTION("found by hash with every field") {
    auto found = org_store(*db).find_api_key_by_hash(std::string(64, 'a'));
    REQUIRE(found);
    CHECK(found->id == ka.id);
    CHECK(found->org_id == a.id);
    CHECK(found->name == "ci");
    CHECK(found->role == "member");
    CHECK(found->created_at == t0);
    CHECK(found->expires_at == ka.expires_at);
    CHECK_FALSE(found->revoked_at);
    CHECK(org_store(*db).find_api_key_by_hash(std::string(64, 'e')).err().code == errc::not_found);
  }
  SECTION("listed per organization") {
    auto list_a = org_store(*db).list_api_keys(a.id);
    REQUIRE(list_a);
    REQUIRE(list_a->size() == 1);
    CHECK((*list_a)[0].id == ka.id);
    auto list_b = org_store(*db).list_api_keys(b.id);
    REQUIRE(list_b);
    REQUIRE(list_b->size() == 1);
    CHECK((*list_b)[0].id == kb.id);
  }
  SECTION("revoked once, in its own organization only") {
    auto other = org_store(*db).revoke_api_key(b.id, ka.id, t0);
    REQUIRE_FALSE(other);
    CHECK(other.err().code == errc::not_found);
    CHECK_FALSE(org_store(*db).find_api_key_by_hash(std::string(64, 'a'))->revoked_at);

    REQUIRE(org_store(*db).revoke_api_key(a.id, ka.id, "2026-02-01T00:00:00.000Z"));
    auto found = org_store(*db).find_api_key_by_hash(std::string(64, 'a'));
    REQUIRE(found);
    CHECK(found->revoked_at == std::optional<std::string>("2026-02-01T00:00:00.000Z"));
    auto listed = org_store(*db).list_api_keys(a.id);
    REQUIRE(listed);
    REQUIRE(listed->size() == 1);
    CHECK((*listed)[0].revoked_at);

    auto twice = org_store(*db).revoke_api_key(a.id, ka.id, t0);
    REQUIRE_FALSE(twice);
    CHECK(twice.err().code == errc::not_found);
    CHECK(org_store(*db).revoke_api_key(a.id, "key-0000000000000000", t0).err().code == errc::not_found);
  }
}

TEST_CASE("text is stored as given, quotes and all") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto o = org_store(*db).create_org("o'brien; DROP TABLE orgs; --", false, t0);
  REQUIRE(o);
  auto found = org_store(*db).find_org_by_name("o'brien; DROP TABLE orgs; --");
  REQUIRE(found);
  CHECK(found->id == o->id);
}

TEST_CASE("organizations move through their life cycle only along its edges") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("sandfort.db"));
  auto o = make_org(*db, "acme");
  CHECK(o.state == "active");
  CHECK_FALSE(o.state_changed_at);

  REQUIRE(org_store(*db).set_org_state(o.id, "disabled", {"active"}, "2026-01-02T00:00:00.000Z"));
  auto got = org_store(*db).get_org(o.id);
  REQUIRE(got);
  CHECK(got->state == "disabled");
  CHECK(got->state_changed_at == std::optional<std::string>("2026-01-02T00:00:00.000Z"));
  // Not from a state that is not listed.
  auto wrong = org_store(*db).set_org_state(o.id, "deleted", {"deleting"}, t0);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.err().code == errc::conflict);
  CHECK(org_store(*db).set_org_state("org-0000000000000000", "disabled", {"active"}, t0).err().code == errc::not_found);
  // The schema refuses a state that does not exist.
  CHECK_FALSE(org_store(*db).set_org_state(o.id, "frozen", {"disabled"}, t0));

  REQUIRE(org_store(*db).set_org_state(o.id, "deleting", {"active", "disabled"}, t0));
  REQUIRE(org_store(*db).set_org_state(o.id, "deleted", {"deleting"}, t0));
  auto listed = org_store(*db).list_orgs();
  REQUIRE(listed);
  CHECK(std::none_of(listed->begin(), listed->end(), [&](const org& x) { return x.id == o.id; }));
  // The name stays taken by the deleted row.
  CHECK(org_store(*db).create_org("acme", false, t0).err().code == errc::conflict);
}

TEST_CASE("an organization's keys are revoked together, a key records its last use") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("sandfort.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  auto add_key = [&](const std::string& org_id, const std::string& id) {
    api_key k{id, org_id, "k", "member", t0, std::nullopt, std::nullopt, std::nullopt};
    REQUIRE(org_store(*db).insert_api_key(k, "hash-" + id));
  };
  add_key(a.id, "key-a1");
  add_key(a.id, "key-a2");
  add_key(b.id, "key-b1");
  REQUIRE(org_store(*db).revoke_api_key(a.id, "key-a2", t0));
  auto revoked = org_store(*db).revoke_org_keys(a.id, "2026-01-03T00:00:00.000Z");
  REQUIRE(revoked);
  CHECK(*revoked == 1);  // the one already revoked keeps its time
  CHECK(org_store(*db).find_api_key_by_hash("hash-key-a1")->revoked_at ==
        std::optional<std::string>("2026-01-03T00:00:00.000Z"));
  CHECK(org_store(*db).find_api_key_by_hash("hash-key-a2")->revoked_at == std::optional<std::string>(t0));
  CHECK_FALSE(org_store(*db).find_api_key_by_hash("hash-key-b1")->revoked_at);

  CHECK_FALSE(org_store(*db).find_api_key_by_hash("hash-key-b1")->last_used_at);
  REQUIRE(org_store(*db).touch_api_key("key-b1", "2026-01-04T00:00:00.000Z"));
  CHECK(org_store(*db).find_api_key_by_hash("hash-key-b1")->last_used_at ==
        std::optional<std::string>("2026-01-04T00:00:00.000Z"));
}
