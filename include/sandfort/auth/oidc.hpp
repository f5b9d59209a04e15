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
#include <string_view>
#include <vector>

#include "sandfort/auth/jwt.hpp"
#include "sandfort/auth/key_cache.hpp"
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

// POSTs a form to an issuer's endpoint (the console's token request), with an Authorization
// header when it is not empty. The network one has the fetcher's rules.
using form_poster = std::function<boost::asio::awaitable<result<http::response>>(
    std::string url, std::string form, std::string authorization, const oidc_issuer_config& issuer)>;
form_poster network_poster(std::chrono::seconds timeout);

// Whether a host is this machine's loopback (plain http is allowed to it, and only to it).
bool is_loopback_host(std::string_view host);

// An access token that verified: the principal it stands for, and until when.
struct verified_access {
  principal who;
  time_point expires_at;
};

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
  // The same checks, with the token's expiry (the console's sign-in keeps a session until then).
  boost::asio::awaitable<result<verified_access>> verify_access_token(std::string token, std::string request_id);
  // An ID token of `issuer` for the client `client_id` (OpenID Connect Core 3.1.3.7): its signature
  // by that issuer's keys, iss, aud containing client_id, exp; its claims (the caller checks the
  // nonce). Refusals as authenticate's.
  boost::asio::awaitable<result<nlohmann::json>> verify_id_token(std::string issuer, std::string token,
                                                                 std::string client_id, std::string request_id);
  // The discovery document of a configured issuer (OpenID Connect Discovery 1.0), its `issuer`
  // exactly this one. Kept for jwks_default_cache_s, a failure (idp_unavailable) for
  // jwks_min_refresh_s; one fetch per issuer at a time. invalid_argument for an unknown issuer.
  boost::asio::awaitable<result<nlohmann::json>> discovery(const std::string& issuer);
  // Whether `issuer` is configured with console sign-in (console_client_id).
  bool offers_console_sign_in(const std::string& issuer) const;

  // How many times an issuer's keys were fetched (a test and metrics reading).
  std::uint64_t jwks_fetches() const { return jwks_fetches_; }

  struct issuer_state;

 private:
  // A token of `is` whose signature and claims verify under `policy` (is.policy, or an ID token's).
  boost::asio::awaitable<result<jwt::claims>> verify_signed(issuer_state& is, const std::string& token,
                                                            const jwt::policy& policy, const std::string& request_id);
  boost::asio::awaitable<result<void>> refresh(issuer_state& is);
  boost::asio::awaitable<result<void>> fetch_keys(issuer_state& is);
  boost::asio::awaitable<result<nlohmann::json>> discover(issuer_state& is);
  boost::asio::awaitable<result<void>> fetch_discovery(issuer_state& is);
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
  key_cache keys_;       // used on the I/O thread only, like db_
};

}  // namespace sandfort::auth
