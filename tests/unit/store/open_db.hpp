#pragma once
// Shared by the store tests: a database opened (and migrated) at a path, and a fixed timestamp.

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "sandfort/store/database.hpp"

namespace sandfort::testing {

inline constexpr const char* t0 = "2026-01-01T00:00:00.000Z";

inline std::unique_ptr<store::database> open_db(const std::string& path) {
  auto db = store::database::open(path);
  INFO((db ? std::string() : db.err().message));
  REQUIRE(db);
  return std::move(db).value();
}

}  // namespace sandfort::testing
