#pragma once
// The CLI's side of OpenID Connect: discovery, the device authorization grant (RFC 8628) for
// `sandfort login --oidc`, the refresh-token grant and token revocation (RFC 7009). The CLI is a
// public client: it authenticates to the issuer with its client id alone.

#include <cstdint>
#include <iosfwd>
#include <string>

#include "config.hpp"

namespace sandfort::cli::oidc {

struct endpoints {
  std::string issuer;  // as the discovery document names it (what the daemon matches `iss` against)
  std::string device_authorization_endpoint;
  std::string token_endpoint;
  std::string revocation_endpoint;  // empty when not offered
};

// GET <issuer>/.well-known/openid-configuration; the document must name the same issuer.
endpoints discover(const std::string& issuer_url);

struct grant_options {
  std::string client_id;
  std::string scope;
  std::string resource;  // RFC 8707, sent when not empty
  std::string audience;  // sent when not empty
};

struct tokens {
  std::string access_token;
  std::string refresh_token;
  std::int64_t expires_at = 0;  // 0: the issuer did not say
};

// Starts the device flow, tells the user on `out` where to go and which code to check, then polls
// the token endpoint (honouring interval and slow_down) until the user has signed in. Throws
// failure when the user denies, the code expires or the issuer refuses.
tokens device_flow(const endpoints& ep, const grant_options& o, std::ostream& out);

// grant_type=refresh_token. Throws failure telling the user to log in again when the issuer
// refuses the refresh token (expired, revoked, reused).
tokens refresh(const oidc_session& s);

// Revokes the refresh token; an empty string on success, else why not.
std::string revoke(const oidc_session& s);

}  // namespace sandfort::cli::oidc
