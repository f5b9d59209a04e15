#include "sandfort/auth/key_cache.hpp"

namespace sandfort::auth {

key_cache::entry* key_cache::find(const std::string& key_sha256, time_point now) {
  auto it = entries_.find(key_sha256);
  if (it == entries_.end()) return nullptr;
  const entry& e = it->second;
  // A clock set back counts as old, too.
  if (e.generation != store::org_store::generation() || now < e.read_at || now - e.read_at >= max_age_) {
    entries_.erase(it);
    return nullptr;
  }
  return &it->second;
}

void key_cache::put(const std::string& key_sha256, store::api_key key, store::org org, std::uint64_t generation,
                    time_point now) {
  if (entries_.size() >= capacity_ && !entries_.contains(key_sha256)) entries_.clear();
  entries_.insert_or_assign(key_sha256, entry{std::move(key), std::move(org), generation, now});
}

}  // namespace sandfort::auth
