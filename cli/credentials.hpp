#pragma once
// What a request to sandfortd authenticates with: an API key, or the access token of an OIDC
// sign-in that is renewed with its refresh token shortly before it expires and once more when the
// daemon refuses it.

#include <memory>
#include <string>

#include "config.hpp"

namespace sandfort::cli {

class credentials {
 public:
  virtual ~credentials() = default;
  // The bearer token for the next request.
  virtual std::string bearer() = 0;
  // After the daemon refused `refused` with 401: true when there is another token to try.
  virtual bool renew(const std::string& refused) = 0;
};

// A fixed token (an API key, or a token being checked at login): nothing to renew.
std::shared_ptr<credentials> fixed_credentials(std::string token);

// The stored OIDC sign-in; renewals are written back to the config file under credentials_lock.
std::shared_ptr<credentials> oidc_credentials(oidc_session session);

// The credentials that `s` names (API key first, as the environment's key overrides a sign-in).
std::shared_ptr<credentials> credentials_for(const settings& s);

}  // namespace sandfort::cli
