#pragma once
// E2B-compatible endpoints (docs/e2b.md): the unmodified E2B SDKs reach sandfortd with
// E2B_API_URL=<base>/e2b, E2B_SANDBOX_URL=<base>/e2b-sandbox and E2B_API_KEY=<a Sandfort key>.
// A translation layer over the API's backends: its routes join the one route registry
// (src/api/routes.hpp), behind the same guard (key, role, rate limits, state disk).

#include <string>

#include "sandfort/core/error.hpp"

namespace sandfort::compat::e2b {

// The sandbox plane's credential: per-sandbox access tokens, stored hashed by the daemon.
class token_backend {
 public:
  virtual ~token_backend() = default;
  // Records a freshly minted token's SHA-256 for the sandbox.
  virtual result<void> add(const std::string& sandbox_id, const std::string& token_sha256) = 0;
  // The organization of the sandbox `sandbox_id` the token (by its SHA-256) was minted for, and
  // whether that sandbox is deleted; not_found when it was minted for no such sandbox.
  struct grant {
    std::string org_id;
    bool deleted = false;
  };
  virtual result<grant> grant_of(const std::string& sandbox_id, const std::string& token_sha256) = 0;
};

// Adds the /e2b and /e2b-sandbox tables to the route registry. `tokens` may be null where the
// routes are only listed (`sandfortd routes`); it must outlive the server otherwise.
void register_routes(token_backend* tokens);

}  // namespace sandfort::compat::e2b
