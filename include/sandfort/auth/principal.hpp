#pragma once
// Who is calling and what they may do: the result of authenticating an API key or an
// identity provider's token, the same shape for both so routes never care which it was.

#include <string>

#include "sandfort/core/error.hpp"

namespace sandfort::auth {

enum class role { viewer, member, admin };

result<role> parse_role(const std::string& s);
std::string to_string(role r);

// What a request is allowed to do, from least to most.
enum class permission { read, use_sandboxes, manage_org, superadmin };
bool allows(role r, bool superadmin_org, permission p);

enum class method { api_key, oidc };
std::string to_string(method m);

struct principal {
  std::string org_id;
  std::string org_name;
  bool superadmin = false;  // an admin of the superadmin organization
  method via = method::api_key;
  std::string id;      // the key's id, or the token's subject (`sub`)
  std::string name;    // the key's name, or the user's name claim (email by default)
  std::string issuer;  // the identity provider (oidc only)
  role granted = role::viewer;
  // Set when the request came with a console session's cookie (console_sessions.hpp): the
  // session's SHA-256, and the token a change must carry in X-Sandfort-CSRF.
  std::string console_session;
  std::string console_csrf;
};

}  // namespace sandfort::auth
