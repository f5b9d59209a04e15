#pragma once
// API keys: "sfk_" + 32 random hex characters. Only the SHA-256 of the secret is stored.

#include <string>

#include "sandfort/core/clock.hpp"
#include "sandfort/crypto/digest.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::auth {

enum class role { viewer, member, admin };

result<role> parse_role(const std::string& s);
std::string to_string(role r);

// What a request is allowed to do, from least to most.
enum class permission { read, use_sandboxes, manage_org, superadmin };
bool allows(role r, bool superadmin_org, permission p);

struct principal {
  std::string org_id;
  std::string org_name;
  bool superadmin = false;  // an admin key of the superadmin organization
  std::string key_id;
  std::string key_name;
  role key_role = role::viewer;
};

std::string new_secret();  // "sfk_..."

struct issued_key {
  store::api_key record;
  std::string secret;  // shown once
};

// Creates a key in org_id. expires_in_s <= 0 means never.
result<issued_key> issue_key(store::database& db, const clock& clk, const std::string& org_id,
                             const std::string& name, role r, long long expires_in_s);

// From the Authorization header's value ("Bearer sfk_..."): unauthenticated for anything
// missing, malformed, unknown, revoked or expired.
result<principal> authenticate(store::database& db, const clock& clk, const std::string& authorization);

// `sandfortd admin bootstrap`: creates the superadmin organization and its first admin key.
// conflict when it already exists.
result<issued_key> bootstrap(store::database& db, const clock& clk);

}  // namespace sandfort::auth
