#pragma once
// API keys: "sfk_" + 32 random hex characters. Only the SHA-256 of the secret is stored.

#include <string>

#include "sandfort/auth/key_cache.hpp"
#include "sandfort/auth/principal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/crypto/digest.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/org_store.hpp"

namespace sandfort::auth {

std::string new_secret();  // "sfk_..."

struct issued_key {
  store::api_key record;
  std::string secret;  // shown once
};

// Creates a key in org_id. expires_in_s <= 0 means never.
result<issued_key> issue_key(store::org_store orgs, const clock& clk, const std::string& org_id,
                             const std::string& name, role r, long long expires_in_s);

// The token of an Authorization header's value ("Bearer <token>"), or unauthenticated.
result<std::string> bearer_token(const std::string& authorization);
bool is_api_key(std::string_view token);

// From the Authorization header's value ("Bearer sfk_..."): unauthenticated for anything
// missing, malformed, unknown, revoked or expired, and for a key of an organization that is
// not active (permission_denied while it is disabled). Records the key's use, once a minute.
// With a cache, a key that authenticated lately is checked on the rows kept there (key_cache.hpp).
result<principal> authenticate(store::database& db, const clock& clk, const std::string& authorization,
                               key_cache* cache = nullptr);
// The same checks for a key known by its SHA-256 (a console session made with it).
result<principal> authenticate_key_hash(store::database& db, const clock& clk, const std::string& key_sha256,
                                        key_cache* cache = nullptr);

// The organization a principal belongs to, if it may act now: unauthenticated when it is
// gone (deleting/deleted), permission_denied while disabled.
result<store::org> active_org(store::org_store orgs, const std::string& org_id_or_name, bool by_name);
// Who acts in organization o with role `granted` (a key, a token, a console session): the
// superadmin is an admin of the superadmin organization, and no one else. The caller names them.
principal acting_in(const store::org& o, role granted, method via);

// `sandfortd admin bootstrap`: creates the superadmin organization and its first admin key.
// conflict when it already exists.
result<issued_key> bootstrap(store::org_store orgs, const clock& clk);

}  // namespace sandfort::auth
