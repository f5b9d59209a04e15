// Organization secrets (store/secret_store.hpp): sealed rows only, one name per organization,
// rotations counted, and rows sealed by another key found.
#include <catch2/catch.hpp>

#include "sandfort/store/org_store.hpp"
#include "sandfort/store/secret_store.hpp"
#include "open_db.hpp"
#include "rows.hpp"
#include "temp_dir.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

namespace {

secret_record sealed_row(const std::string& org_id, const std::string& name, const std::string& key_id = "k1") {
  return secret_record{org_id, name, "v1.sealed-" + name, key_id, R"(["api.example.com"])",
                       R"({"type":"query","query":"key"})", 1, t0, t0};
}

}  // namespace

TEST_CASE("secrets: one name per organization, the same name in another, rotations counted") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("t.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  secret_store s(*db);
  REQUIRE(s.insert(sealed_row(a.id, "openai")));
  auto again = s.insert(sealed_row(a.id, "openai"));
  REQUIRE_FALSE(again);
  CHECK(again.err().code == errc::conflict);
  REQUIRE(s.insert(sealed_row(b.id, "openai")));
  REQUIRE(s.insert(sealed_row(a.id, "maps")));
  CHECK(s.count(a.id).value() == 2);
  CHECK(s.count(b.id).value() == 1);
  auto listed = s.list(a.id);
  REQUIRE(listed);
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].name == "maps");

  REQUIRE(s.update(a.id, "openai", std::string("v1.new"), std::string("k1"), std::nullopt, "2026-01-01T00:00:01.000Z"));
  REQUIRE(s.update(a.id, "openai", std::nullopt, std::nullopt, std::string(R"(["b.example"])"),
                   "2026-01-01T00:00:02.000Z"));
  auto row = s.get(a.id, "openai");
  REQUIRE(row);
  CHECK(row->version == 3);
  CHECK(row->sealed_value == "v1.new");
  CHECK(row->hosts_json == R"(["b.example"])");
  CHECK(row->created_at == t0);
  CHECK(row->updated_at == "2026-01-01T00:00:02.000Z");
  CHECK(s.get(b.id, "openai")->version == 1);  // the other organization's is untouched

  CHECK(s.update(a.id, "none", std::string("x"), std::nullopt, std::nullopt, t0).err().code == errc::not_found);
  REQUIRE(s.remove(a.id, "openai"));
  CHECK(s.remove(a.id, "openai").err().code == errc::not_found);
  CHECK(s.get(a.id, "openai").err().code == errc::not_found);
  CHECK(s.get(b.id, "openai"));
}

TEST_CASE("secrets: rows sealed by another key are counted, an organization keeps its first CA") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("t.db"));
  auto a = make_org(*db, "a");
  secret_store s(*db);
  CHECK(s.count_sealed_by_other("k1").value() == 0);
  REQUIRE(s.insert(sealed_row(a.id, "one", "k1")));
  CHECK(s.count_sealed_by_other("k1").value() == 0);
  CHECK(s.count_sealed_by_other("k2").value() == 1);

  CHECK_FALSE(s.interception_ca(a.id).value());
  REQUIRE(s.insert_interception_ca({a.id, "CERT-1", "v1.key-1", "k1", t0}).value());
  CHECK_FALSE(s.insert_interception_ca({a.id, "CERT-2", "v1.key-2", "k1", t0}).value());
  auto ca = s.interception_ca(a.id);
  REQUIRE(ca);
  REQUIRE(*ca);
  CHECK((*ca)->certificate_pem == "CERT-1");
  CHECK(s.count_sealed_by_other("k2").value() == 2);
  REQUIRE(s.remove_interception_ca(a.id));
  CHECK_FALSE(s.interception_ca(a.id).value());
}
