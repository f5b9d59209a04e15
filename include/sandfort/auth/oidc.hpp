#pragma once
// Sign-in through an organization's identity provider: JWT access tokens from configured
// OpenID Connect issuers, checked against each issuer's own key set (docs/identity.md).
//
// Keys come from the issuer's JWKS (its URI configured or discovered), cached for as long as the
// answer's Cache-Control allows (bounded by configuration). A token whose `kid` is unknown asks
// the issuer again at most once per jwks_min_refresh_s, so a flood of forged tokens never turns
// into a flood of fetches; concurrent requests share one fetch. When an issuer's keys cannot be
// had, its tokens fail with idp_unavailable (503), never succeed.

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sandfort/auth/principal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/http/message.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::auth {

// GETs a URL for an issuer (discovery, JWKS). sandfortd uses http::fetch_url; tests may serve
// documents from memory.
using url_fetcher =
    std::function<boost::asio::awaitable<result<http::response>>(std::string url, const oidc_issuer_config& issuer)>;

// The fetcher sandfortd uses: https with the issuer's CA file or the system's trust store;
// plain http only to a loopback host.
url_fetcher network_fetcher(std::chrono::seconds timeout);

class oidc_verifier {
 public:
  oidc_verifier(const oidc_config& cfg, store::database& db, const clock& clk, url_fetcher fetch);
  ~oidc_verifier();
  oidc_verifier(const oidc_verifier&) = delete;
  oidc_verifier& operator=(const oidc_verifier&) = delete;

  bool enabled() const { return !issuers_.empty(); }

  // A bearer token that is not an API key. Every refusal is logged with its reason (and
  // request_id) and answered with one message that tells an attacker nothing:
  // unauthenticated for a token that does not verify or names no known organization,
  // permission_denied when the organization is disabled or the token grants no role,
  // idp_unavailable when the issuer's keys cannot be fetched.
  boost::asio::awaitable<result<principal>> authenticate(std::string token, std::string request_id);

  // How many times an issuer's keys were fetched (a test and metrics reading).
  std::uint64_t jwks_fetches() const { return jwks_fetches_; }

  struct issuer_state;

 private:
  boost::asio::awaitable<result<void>> refresh(issuer_state& is);
  boost::asio::awaitable<result<void>> fetch_keys(issuer_state& is);
  result<principal> to_principal(const issuer_state& is, const nlohmann::json& claims, const std::string& subject);

  const oidc_config& cfg_;
  store::database& db_;
  const clock& clk_;
  url_fetcher fetch_;
  std::vector<std::unique_ptr<issuer_state>> issuers_;
  std::uint64_t jwks_fetches_ = 0;
};

// API keys and tokens behind one call, for the API's guard.
class authenticator {
 public:
  authenticator(store::database& db, const clock& clk, oidc_verifier* oidc) : db_(db), clk_(clk), oidc_(oidc) {}
  // From the Authorization header's value ("Bearer <API key or JWT>").
  boost::asio::awaitable<result<principal>> authenticate(std::string authorization, std::string request_id);

 private:
  store::database& db_;
  const clock& clk_;
  oidc_verifier* oidc_;  // null: API keys only
};

}  // namespace sandfort::auth
