#pragma once
// The API keys that authenticated lately, with their organizations (store/read_cache.hpp), so
// that a request does not read both again: two SQLite reads on the I/O thread, which had been a
// tenth of sandfortd's CPU per exec. Trusted while no change to an organization or a key has
// been made through this process's org_store since they were read (a revoke, a disable, a
// delete, a new key: the next request reads again, so a revoke still takes effect at once) and
// for at most max_age (a change by hand to the file). Only a key that authenticated is kept, so
// guessing keys reads the database every time. auth::authenticate runs its checks (revoked,
// expired, the organization active, the role) on every use, on the kept rows.

#include <chrono>
#include <cstddef>

#include "sandfort/store/org_store.hpp"
#include "sandfort/store/read_cache.hpp"

namespace sandfort::auth {

struct key_rows {
  store::api_key key;
  store::org org;
};

class key_cache : public store::read_cache<key_rows> {
 public:
  explicit key_cache(std::chrono::milliseconds max_age = default_max_age, std::size_t capacity = default_capacity)
      : read_cache(&store::org_store::generation, max_age, capacity) {}
};

}  // namespace sandfort::auth
