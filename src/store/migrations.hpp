#pragma once
// The schema's history. Versions are 1, 2, 3, ... in order; the database's PRAGMA user_version
// is the last one applied. Migrations are append-only: never edit one that has shipped.

#include <sqlite3.h>

#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::store::detail {

struct migration {
  int version;
  const char* sql;
  // Runs after `sql`, in the same transaction, for what SQL alone cannot do
  // (a value that must come from our random source).
  result<void> (*then)(sqlite3* db) = nullptr;
};

const std::vector<migration>& migrations();

}  // namespace sandfort::store::detail
