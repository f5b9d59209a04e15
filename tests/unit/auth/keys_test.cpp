#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "../store/open_db.hpp"
#include "../store/temp_dir.hpp"
#include "sandfort/auth/keys.hpp"
#include "sandfort/core/ids.hpp"
#include "support/manual_clock.hpp"

using namespace sandfort;
using namespace sandfort::auth;

namespace {

struct fixture {
  testing::temp_dir dir;
  std::string path = dir.file("sandfort.db");
  std::unique_ptr<store::database> db = testing::open_db(path);
  testing::manual_clock clk;

  store::org org(const std::string& name, bool superadmin = false) {
    auto o = store::org_store(*db).create_org(name, superadmin, format_time(clk.now()));
    REQUIRE(o);
    return *o;
  }
  issued_key issue(const std::string& org_id, role r, long long expires_in_s = 0) {
    auto k = issue_key(*db, clk, org_id, "test", r, expires_in_s);
    REQUIRE(k);
    return *k;
  }
};

void check_unauthenticated(const result<principal>& p, const std::string& message) {
  REQUIRE_FALSE(p);
  CHECK(p.err().code == errc::unauthenticated);
  CHECK(p.err().message == message);
}

}  // namespace

TEST_CASE("sha256_hex matches the FIPS 180-2 vectors") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("secrets are sfk_ and 32 hex characters, and differ") {
  auto a = new_secret();
  auto b = new_secret();
  CHECK(is_id(a, "sfk_", 32));
  CHECK(is_id(b, "sfk_", 32));
  CHECK(a != b);
}

TEST_CASE("roles parse and print") {
  for (role r : {role::viewer, role::member, role::admin}) {
    auto parsed = parse_role(to_string(r));
    REQUIRE(parsed);
    CHECK(*parsed == r);
  }
  auto bad = parse_role("owner");
  REQUIRE_FALSE(bad);
  CHECK(bad.err().code == errc::invalid_argument);
  CHECK_THAT(bad.err().message, Catch::Contains("admin") && Catch::Contains("member") && Catch::Contains("viewer"));
  CHECK_FALSE(parse_role("Admin"));
  CHECK_FALSE(parse_role(""));
}

TEST_CASE("allows: what each role may do") {
  using p = permission;
  for (bool super_org : {false, true}) {
    CHECK(allows(role::viewer, super_org, p::read));
    CHECK_FALSE(allows(role::viewer, super_org, p::use_sandboxes));
    CHECK_FALSE(allows(role::viewer, super_org, p::manage_org));
    CHECK_FALSE(allows(role::viewer, super_org, p::superadmin));

    CHECK(allows(role::member, super_org, p::read));
    CHECK(allows(role::member, super_org, p::use_sandboxes));
    CHECK_FALSE(allows(role::member, super_org, p::manage_org));
    CHECK_FALSE(allows(role::member, super_org, p::superadmin));

    CHECK(allows(role::admin, super_org, p::read));
    CHECK(allows(role::admin, super_org, p::use_sandboxes));
    CHECK(allows(role::admin, super_org, p::manage_org));
  }
  CHECK_FALSE(allows(role::admin, false, p::superadmin));
  CHECK(allows(role::admin, true, p::superadmin));
}

TEST_CASE("acting_in: only an admin of the superadmin organization is the superadmin, however signed in") {
  const store::org root{"org-0000000000000001", "operator", true};
  const store::org other{"org-0000000000000002", "acme", false};
  for (method via : {method::api_key, method::oidc}) {
    const principal admin = acting_in(root, role::admin, via);
    CHECK(admin.superadmin);
    CHECK(admin.org_id == root.id);
    CHECK(admin.org_name == "operator");
    CHECK(admin.granted == role::admin);
    CHECK(admin.via == via);
    CHECK_FALSE(acting_in(root, role::member, via).superadmin);
    CHECK_FALSE(acting_in(root, role::viewer, via).superadmin);
    CHECK_FALSE(acting_in(other, role::admin, via).superadmin);
  }
}

TEST_CASE("an issued key authenticates as its organization, key and role") {
  fixture f;
  auto acme = f.org("acme");
  auto k = issue_key(*f.db, f.clk, acme.id, "ci runner", role::member, 0);
  REQUIRE(k);
  CHECK(is_id(k->record.id, "key-"));
  CHECK(k->record.org_id == acme.id);
  CHECK(k->record.name == "ci runner");
  CHECK(k->record.role == "member");
  CHECK(k->record.created_at == "2026-01-01T00:00:00.000Z");
  CHECK_FALSE(k->record.expires_at);
  CHECK(is_id(k->secret, "sfk_", 32));

  auto p = authenticate(*f.db, f.clk, "Bearer " + k->secret);
  REQUIRE(p);
  CHECK(p->org_id == acme.id);
  CHECK(p->org_name == "acme");
  CHECK_FALSE(p->superadmin);
  CHECK(p->id == k->record.id);
  CHECK(p->name == "ci runner");
  CHECK(p->granted == role::member);

  SECTION("the scheme is case-insensitive and spaces are tolerated") {
    CHECK(authenticate(*f.db, f.clk, "bearer " + k->secret));
    CHECK(authenticate(*f.db, f.clk, "BEARER   " + k->secret + "  "));
    CHECK(authenticate(*f.db, f.clk, "  Bearer\t" + k->secret));
  }
  SECTION("the key is listed without its secret") {
    auto keys = store::org_store(*f.db).list_api_keys(acme.id);
    REQUIRE(keys);
    REQUIRE(keys->size() == 1);
    CHECK((*keys)[0].id == k->record.id);
  }
}

TEST_CASE("issue_key checks the name and sets the expiry") {
  fixture f;
  auto acme = f.org("acme");
  auto empty = issue_key(*f.db, f.clk, acme.id, "", role::viewer, 0);
  REQUIRE_FALSE(empty);
  CHECK(empty.err().code == errc::invalid_argument);
  auto longest = issue_key(*f.db, f.clk, acme.id, std::string(100, 'n'), role::viewer, 0);
  CHECK(longest);
  auto too_long = issue_key(*f.db, f.clk, acme.id, std::string(101, 'n'), role::viewer, 0);
  REQUIRE_FALSE(too_long);
  CHECK(too_long.err().code == errc::invalid_argument);

  auto expiring = issue_key(*f.db, f.clk, acme.id, "temp", role::viewer, 3600);
  REQUIRE(expiring);
  CHECK(expiring->record.expires_at == std::optional<std::string>("2026-01-01T01:00:00.000Z"));
  auto never = issue_key(*f.db, f.clk, acme.id, "forever", role::viewer, -5);
  REQUIRE(never);
  CHECK_FALSE(never->record.expires_at);

  auto absurd = issue_key(*f.db, f.clk, acme.id, "absurd", role::viewer, 1LL << 60);
  REQUIRE_FALSE(absurd);
  CHECK(absurd.err().code == errc::invalid_argument);

  auto nowhere = issue_key(*f.db, f.clk, "org-0000000000000000", "x", role::viewer, 0);
  REQUIRE_FALSE(nowhere);
  CHECK(nowhere.err().code == errc::not_found);
}

TEST_CASE("authenticate refuses what is missing, malformed or unknown, without echoing it") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::admin);

  check_unauthenticated(authenticate(*f.db, f.clk, ""), "missing API key");
  check_unauthenticated(authenticate(*f.db, f.clk, "   "), "missing API key");
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer"), "missing API key");
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer   "), "missing API key");
  check_unauthenticated(authenticate(*f.db, f.clk, k.secret), "the Authorization header must be \"Bearer <API key>\"");
  check_unauthenticated(authenticate(*f.db, f.clk, "Basic " + k.secret),
                        "the Authorization header must be \"Bearer <API key>\"");
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer garbage"), "invalid API key");
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + k.secret + " extra"), "invalid API key");
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + k.secret.substr(0, 20)), "invalid API key");
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + new_secret()), "invalid API key");
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + sha256_hex(k.secret)), "invalid API key");
}

TEST_CASE("a revoked key stops working at once") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::member);
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret));
  REQUIRE(store::org_store(*f.db).revoke_api_key(acme.id, k.record.id, format_time(f.clk.now())));
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + k.secret), "API key revoked");
}

TEST_CASE("a key stops working when it expires") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::member, 60);
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret));
  f.clk.advance(std::chrono::seconds(59));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret));
  f.clk.advance(std::chrono::seconds(1));
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + k.secret), "API key expired");
}

TEST_CASE("superadmin is an admin key of the superadmin organization") {
  fixture f;
  auto root = f.org("root", true);
  auto acme = f.org("acme");
  auto root_admin = authenticate(*f.db, f.clk, "Bearer " + f.issue(root.id, role::admin).secret);
  REQUIRE(root_admin);
  CHECK(root_admin->superadmin);
  auto root_member = authenticate(*f.db, f.clk, "Bearer " + f.issue(root.id, role::member).secret);
  REQUIRE(root_member);
  CHECK_FALSE(root_member->superadmin);
  auto acme_admin = authenticate(*f.db, f.clk, "Bearer " + f.issue(acme.id, role::admin).secret);
  REQUIRE(acme_admin);
  CHECK_FALSE(acme_admin->superadmin);
}

TEST_CASE("bootstrap creates the superadmin organization once") {
  fixture f;
  auto first = bootstrap(*f.db, f.clk);
  REQUIRE(first);
  CHECK(first->record.name == "bootstrap");
  CHECK(first->record.role == "admin");
  CHECK_FALSE(first->record.expires_at);

  auto org = store::org_store(*f.db).find_org_by_name("superadmin");
  REQUIRE(org);
  CHECK(org->superadmin);
  CHECK(org->id == first->record.org_id);

  auto p = authenticate(*f.db, f.clk, "Bearer " + first->secret);
  REQUIRE(p);
  CHECK(p->superadmin);
  CHECK(p->org_name == "superadmin");
  CHECK(p->granted == role::admin);

  auto second = bootstrap(*f.db, f.clk);
  REQUIRE_FALSE(second);
  CHECK(second.err().code == errc::conflict);
  CHECK(second.err().message == "already bootstrapped");
}

TEST_CASE("only the hash of a secret reaches the database file") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::admin);
  const std::string hash = sha256_hex(k.secret);
  const std::string random_part = k.secret.substr(4);

  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open_v2(f.path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(raw, "SELECT * FROM api_keys", -1, &st, nullptr) == SQLITE_OK);
  int rows = 0;
  bool hash_seen = false;
  while (sqlite3_step(st) == SQLITE_ROW) {
    ++rows;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      const unsigned char* text = sqlite3_column_text(st, c);
      if (text == nullptr) continue;
      std::string value(reinterpret_cast<const char*>(text));
      CHECK(value.find(random_part) == std::string::npos);
      if (value == hash) hash_seen = true;
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(raw);
  CHECK(rows == 1);
  CHECK(hash_seen);

  // Nor in any page of the file or its write-ahead log.
  f.db.reset();
  for (const auto& entry : std::filesystem::directory_iterator(f.dir.path())) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(entry.path().string());
    CHECK(bytes.find(random_part) == std::string::npos);
  }
}

TEST_CASE("a key whose organization is gone does not authenticate") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::admin);
  {
    // Organizations are never deleted through the store; simulate a damaged database.
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(f.path.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw, "PRAGMA foreign_keys=OFF; DELETE FROM orgs", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + k.secret), "invalid API key");
}

TEST_CASE("a key of a disabled organization is refused with 403, of a deleted one with 401") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::admin);
  REQUIRE(store::org_store(*f.db).set_org_state(acme.id, "disabled", {"active"}, format_time(f.clk.now())));
  auto disabled = authenticate(*f.db, f.clk, "Bearer " + k.secret);
  REQUIRE_FALSE(disabled);
  CHECK(disabled.err().code == errc::permission_denied);
  REQUIRE(store::org_store(*f.db).set_org_state(acme.id, "deleting", {"disabled"}, format_time(f.clk.now())));
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + k.secret), "invalid API key");
}

TEST_CASE("a key's use is recorded to the minute, not on every request") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::member);
  auto last_used = [&] { return store::org_store(*f.db).find_api_key_by_hash(sha256_hex(k.secret))->last_used_at; };
  CHECK_FALSE(last_used());
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret));
  const auto first = last_used();
  REQUIRE(first);
  CHECK(*first == format_time(f.clk.now()));
  f.clk.advance(std::chrono::seconds(59));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret));
  CHECK(last_used() == first);
  f.clk.advance(std::chrono::seconds(1));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret));
  CHECK(last_used() == std::optional<std::string>(format_time(f.clk.now())));
}

namespace {

std::uint64_t statements_run(store::database& db) { return db.stats().prepared + db.stats().reused; }

// What another program does to the file (sqlite3 by hand): no org_store of this process sees it.
void change_by_hand(const std::string& path, const std::string& sql) {
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
  CHECK(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(raw);
}

}  // namespace

TEST_CASE("with a key cache, a key that authenticated is not read again, and its checks still run") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::member, 120);
  key_cache cache(std::chrono::hours(1));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache));
  CHECK(cache.size() == 1);
  const auto before = statements_run(*f.db);
  auto again = authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache);
  REQUIRE(again);
  CHECK(statements_run(*f.db) == before);
  CHECK(again->org_id == acme.id);
  CHECK(again->id == k.record.id);
  CHECK(again->granted == role::member);
  // The expiry is checked on the kept row.
  f.clk.advance(std::chrono::seconds(120));
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache), "API key expired");
  // A failure is never kept, and an unknown key is read each time.
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + new_secret(), &cache), "invalid API key");
}

TEST_CASE("with a key cache, a revoke, a disable or a delete through the store is seen by the next request") {
  fixture f;
  auto acme = f.org("acme");
  auto other = f.org("other");
  auto revoked = f.issue(acme.id, role::member);
  auto kept = f.issue(other.id, role::admin);
  key_cache cache(std::chrono::hours(1));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + revoked.secret, &cache));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + kept.secret, &cache));
  REQUIRE(store::org_store(*f.db).revoke_api_key(acme.id, revoked.record.id, format_time(f.clk.now())));
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + revoked.secret, &cache), "API key revoked");

  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + kept.secret, &cache));
  REQUIRE(store::org_store(*f.db).set_org_state(other.id, "disabled", {"active"}, format_time(f.clk.now())));
  auto disabled = authenticate(*f.db, f.clk, "Bearer " + kept.secret, &cache);
  REQUIRE_FALSE(disabled);
  CHECK(disabled.err().code == errc::permission_denied);
  REQUIRE(store::org_store(*f.db).set_org_state(other.id, "active", {"disabled"}, format_time(f.clk.now())));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + kept.secret, &cache));
  REQUIRE(*store::org_store(*f.db).revoke_org_keys(other.id, format_time(f.clk.now())) == 1);
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + kept.secret, &cache), "API key revoked");
}

TEST_CASE("with a key cache, a change another program makes to the file is seen within max_age") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::admin);
  key_cache cache(std::chrono::seconds(1));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache));
  change_by_hand(f.path, "UPDATE api_keys SET revoked_at = '2026-01-01T00:00:00Z'");
  f.clk.advance(std::chrono::milliseconds(999));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache));  // kept: this is what the cache is for
  f.clk.advance(std::chrono::milliseconds(1));
  check_unauthenticated(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache), "API key revoked");
}

TEST_CASE("with a key cache, nothing read inside a transaction is kept") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::member);
  key_cache cache(std::chrono::hours(1));
  {
    auto tx = f.db->begin();
    REQUIRE(tx);
    REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache));
    CHECK(cache.size() == 0);
  }
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache));
  CHECK(cache.size() == 1);
}

TEST_CASE("with a key cache, a key's use is still recorded to the minute") {
  fixture f;
  auto acme = f.org("acme");
  auto k = f.issue(acme.id, role::member);
  key_cache cache(std::chrono::hours(1));
  auto last_used = [&] { return store::org_store(*f.db).find_api_key_by_hash(sha256_hex(k.secret))->last_used_at; };
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache));
  const auto first = last_used();
  REQUIRE(first);
  f.clk.advance(std::chrono::seconds(59));
  const auto before = statements_run(*f.db);
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache));
  CHECK(statements_run(*f.db) == before);
  CHECK(last_used() == first);
  f.clk.advance(std::chrono::seconds(1));
  REQUIRE(authenticate(*f.db, f.clk, "Bearer " + k.secret, &cache));
  CHECK(last_used() == std::optional<std::string>(format_time(f.clk.now())));
}

TEST_CASE("a key cache holds at most its capacity") {
  fixture f;
  auto acme = f.org("acme");
  key_cache cache(std::chrono::hours(1), 3);
  for (int i = 0; i < 7; ++i) {
    REQUIRE(authenticate(*f.db, f.clk, "Bearer " + f.issue(acme.id, role::viewer).secret, &cache));
    CHECK(cache.size() <= 3);
  }
  CHECK(cache.size() >= 1);
}
