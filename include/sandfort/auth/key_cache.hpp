#pragma once
// The API keys that authenticated lately, with their organizations, so that a request does not
// read both again. Each is a SQLite read of its own on the I/O thread's connection, and each
// re-reads its pages from the file after any other connection's commit (the audit writer's,
// after every command), which made them a tenth of sandfortd's CPU per exec.
//
// An entry is trusted only while
// - store::org_store::generation() has not moved since it was read: every change this process
//   makes to an organization or a key moves it (a revoke, a disable, a delete, a new key), so
//   the next request reads the rows again and sees the change;
// - it is younger than max_age: a change made by another program on the database file (sqlite3
//   by hand; `sandfortd admin bootstrap` only adds) is seen within that.
// Only a key that authenticated is kept, read outside any transaction of the connection (a row
// read inside one may yet be rolled back). The checks of auth::authenticate (revoked, expired,
// the organization active, the role) run on every use, on the kept rows.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "sandfort/core/clock.hpp"
#include "sandfort/store/org_store.hpp"

namespace sandfort::auth {

class key_cache {
 public:
  static constexpr std::chrono::seconds default_max_age{1};
  static constexpr std::size_t default_capacity = 4096;

  struct entry {
    store::api_key key;
    store::org org;
    std::uint64_t generation = 0;
    time_point read_at;
  };

  explicit key_cache(std::chrono::milliseconds max_age = default_max_age, std::size_t capacity = default_capacity)
      : max_age_(max_age), capacity_(capacity) {}

  // The entry for the key with this SHA-256 if it may still be trusted at `now`, else null.
  entry* find(const std::string& key_sha256, time_point now);
  // Keeps what was just read. When full, everything kept is dropped first: the bound is what
  // matters, and a full cache means more keys in use than it is for.
  void put(const std::string& key_sha256, store::api_key key, store::org org, std::uint64_t generation,
           time_point now);
  std::size_t size() const { return entries_.size(); }

 private:
  std::chrono::milliseconds max_age_;
  std::size_t capacity_;
  std::unordered_map<std::string, entry> entries_;
};

}  // namespace sandfort::auth
