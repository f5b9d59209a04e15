#pragma once
// Organizations and their API keys (src/store/orgs.cpp).
// Over the one connection and statement cache of store::database (database.hpp); a thin handle,
// copied freely, that must not outlive its database.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::store {

// The operator's organization (created at bootstrap; its keys are superadmins).
inline constexpr const char* operator_org_name = "superadmin";

struct org {
  std::string id;  // "org-" + 16 hex
  std::string name;
  bool superadmin = false;
  std::string created_at;
  // active → disabled ⇄ active; active|disabled → deleting → deleted. Only an active
  // organization's keys and tokens are accepted.
  std::string state = "active";
  std::optional<std::string> state_changed_at;
};

struct api_key {
  std::string id;  // "key-" + 16 hex
  std::string org_id;
  std::string name;
  std::string role;  // admin | member | viewer
  std::string created_at;
  std::optional<std::string> expires_at;
  std::optional<std::string> revoked_at;
  std::optional<std::string> last_used_at;  // to the minute: written at most once a minute
};

class org_store {
 public:
  // Implicit: a part that needs only this store is handed the database it lives in.
  org_store(database& db) : db_(&db) {}  // NOLINT

  result<org> create_org(const std::string& name, bool superadmin, const std::string& created_at);
  result<org> get_org(const std::string& id);
  result<org> find_org_by_name(const std::string& name);
  // Every organization not deleted, by name.
  result<std::vector<org>> list_orgs();
  // Moves an organization to `state`, only from one of `from` (conflict otherwise, not_found if absent).
  result<void> set_org_state(const std::string& id, const std::string& state, const std::vector<std::string>& from,
                             const std::string& at);
  // Revokes every key of the organization not revoked yet; returns how many.
  result<int> revoke_org_keys(const std::string& org_id, const std::string& revoked_at);

  // key.id, org_id, name, role, created_at, expires_at are taken from `key`.
  result<void> insert_api_key(const api_key& key, const std::string& secret_sha256_hex);
  // Any key with that hash, revoked or expired ones included (the caller decides).
  result<api_key> find_api_key_by_hash(const std::string& secret_sha256_hex);
  result<std::vector<api_key>> list_api_keys(const std::string& org_id);
  // Keys of the organization that still work at `now`: not revoked, not expired (the key cap).
  result<std::int64_t> count_working_api_keys(const std::string& org_id, const std::string& now);
  // not_found when the key is absent, in another organization, or already revoked.
  result<void> revoke_api_key(const std::string& org_id, const std::string& key_id, const std::string& revoked_at);
  // Records a use of the key (the caller writes at most once a minute per key).
  result<void> touch_api_key(const std::string& key_id, const std::string& used_at);

  // Moves on each change this process makes to an organization or an API key, through any
  // org_store, committed or not (a use recorded by touch_api_key aside): what has not moved
  // since a read may be trusted without reading again (auth::key_cache).
  static std::uint64_t generation();

 private:
  database* db_;
};

}  // namespace sandfort::store
