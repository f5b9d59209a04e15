#pragma once
// Rows the store tests make: an organization, a sandbox, an API key (fixed times, random ids);
// and a look at the file behind the store's back.

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <string>

#include "open_db.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::testing {

inline store::org make_org(store::database& db, const std::string& name) {
  auto o = store::org_store(db).create_org(name, false, t0);
  REQUIRE(o);
  return *o;
}

// Unnamed unless given a name; started unless given a state.
inline store::sandbox_record sandbox(const std::string& org_id, const std::string& name = {},
                                     const std::string& state = "started") {
  store::sandbox_record s;
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

inline store::api_key key(const std::string& org_id, const std::string& name) {
  store::api_key k;
  k.id = new_id("key-");
  k.org_id = org_id;
  k.name = name;
  k.role = "member";
  k.created_at = t0;
  return k;
}

// Runs one query on the file behind the store's back and returns the first column of the first row.
inline std::string raw_query(const std::string& path, const char* sql) {
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

}  // namespace sandfort::testing
