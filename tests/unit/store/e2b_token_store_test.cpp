// The E2B sandbox plane's access tokens (store/e2b_token_store.hpp): a token opens the sandbox it
// was minted for only, says when that sandbox is deleted, and goes with its row.
#include <catch2/catch.hpp>

#include "sandfort/store/e2b_token_store.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"
#include "open_db.hpp"
#include "rows.hpp"
#include "temp_dir.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

TEST_CASE("e2b tokens: a token opens its own sandbox, not another's, not another hash") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("t.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  auto mine = sandbox(a.id);
  auto theirs = sandbox(b.id);
  REQUIRE(sandbox_store(*db).insert_sandbox(mine));
  REQUIRE(sandbox_store(*db).insert_sandbox(theirs));
  e2b_token_store tokens(*db);
  REQUIRE(tokens.add_token(mine.id, "hash-mine", t0, 16));
  REQUIRE(tokens.add_token(theirs.id, "hash-theirs", t0, 16));

  auto grant = tokens.token_grant(mine.id, "hash-mine");
  REQUIRE(grant);
  CHECK(grant->org_id == a.id);
  CHECK_FALSE(grant->deleted);
  CHECK(tokens.token_grant(theirs.id, "hash-mine").err().code == errc::not_found);
  CHECK(tokens.token_grant(mine.id, "hash-theirs").err().code == errc::not_found);
  CHECK(tokens.token_grant(mine.id, "hash-other").err().code == errc::not_found);
  CHECK(tokens.token_grant("sbx-nothing", "hash-mine").err().code == errc::not_found);
}

TEST_CASE("e2b tokens: a sandbox keeps its newest tokens only") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("t.db"));
  auto a = make_org(*db, "a");
  auto s = sandbox(a.id);
  REQUIRE(sandbox_store(*db).insert_sandbox(s));
  e2b_token_store tokens(*db);
  REQUIRE(tokens.add_token(s.id, "h1", "2026-01-01T00:00:01.000Z", 2));
  REQUIRE(tokens.add_token(s.id, "h2", "2026-01-01T00:00:02.000Z", 2));
  REQUIRE(tokens.add_token(s.id, "h3", "2026-01-01T00:00:03.000Z", 2));
  CHECK(tokens.token_grant(s.id, "h1").err().code == errc::not_found);
  CHECK(tokens.token_grant(s.id, "h2"));
  CHECK(tokens.token_grant(s.id, "h3"));
}

TEST_CASE("e2b tokens: a deleted sandbox's token says so, and goes when its row is pruned") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("t.db"));
  auto a = make_org(*db, "a");
  auto s = sandbox(a.id);
  REQUIRE(sandbox_store(*db).insert_sandbox(s));
  e2b_token_store tokens(*db);
  REQUIRE(tokens.add_token(s.id, "h", t0, 16));
  s.state = "deleted";
  s.updated_at = "2026-01-01T01:00:00.000Z";
  REQUIRE(sandbox_store(*db).update_sandbox(s));
  auto grant = tokens.token_grant(s.id, "h");
  REQUIRE(grant);
  CHECK(grant->deleted);

  auto pruned = sandbox_store(*db).prune_deleted_sandboxes("2027-01-01T00:00:00.000Z", 10);
  REQUIRE(pruned);
  CHECK(*pruned == 1);
  CHECK(tokens.token_grant(s.id, "h").err().code == errc::not_found);
}
