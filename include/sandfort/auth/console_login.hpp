#pragma once
// Signing in to the console through an identity provider (docs/console.md): the OAuth 2.0
// authorization code flow with PKCE, as OpenID Connect's code flow, run by sandfortd itself (the
// browser never holds a token).
//
//   start:  the browser asks for an issuer → a pending sign-in is stored (state, PKCE verifier,
//           nonce, the exact redirect URI), bound to a fresh pre-login cookie, and the browser is
//           sent to the provider's authorization endpoint (from its discovery document).
//   finish: the provider sends the browser back with code and state → the pending sign-in is
//           taken (once: a state is good for one callback, whatever its outcome), checked against
//           the pre-login cookie and its age, the code is exchanged at the token endpoint with the
//           verifier, the ID token's signature, audience and nonce are checked, and the access
//           token is verified exactly as a bearer token is (oidc_verifier). Its principal and
//           expiry are what a console session is then made of (console_sessions.hpp).
//
// Why each step: docs/security.md, "Console sign-in through an identity provider".

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/auth/oidc.hpp"
#include "sandfort/auth/principal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::auth {

// An issuer the console offers a button for: the key the start route takes, and the label.
struct console_issuer {
  std::string id;
  std::string name;
};

// Where start sends the browser, and the pre-login cookie's value that binds the callback to it.
struct login_redirect {
  std::string location;
  std::string browser_secret;
};

// What came back to the callback: its query's parameters and the pre-login cookie (empty: none).
struct login_callback {
  std::string state;
  std::string code;
  std::string error;  // the provider's `error`, when it refused (the user cancelled, …)
  std::string iss;    // RFC 9207's `iss`, when the provider sends it
  std::string browser_secret;
};

// A sign-in that succeeded: who the provider proved, and until when its access token holds.
struct proven_identity {
  principal who;
  time_point expires_at;
};

// Why a sign-in did not complete, as the console's page names it (`/console/#/signin?error=<code>`):
// the message of every error start (other than an unknown issuer) and finish return. The details
// go to the daemon's log, with the request id, never to the browser.
namespace login_error {
inline constexpr const char* cancelled = "cancelled";            // the provider says access_denied
inline constexpr const char* provider_error = "provider_error";  // the provider said another error
inline constexpr const char* bad_callback = "bad_callback";      // no state or no code
inline constexpr const char* expired = "expired";                // no such sign-in under way: used, too old, or never begun
inline constexpr const char* wrong_browser = "wrong_browser";    // the pre-login cookie is missing or another one
inline constexpr const char* issuer_mismatch = "issuer_mismatch";  // the answer names another issuer (RFC 9207)
inline constexpr const char* token_exchange = "token_exchange";  // the token endpoint refused the code
inline constexpr const char* token_refused = "token_refused";    // the tokens did not verify
inline constexpr const char* no_access = "no_access";            // the organization is disabled or grants no role
inline constexpr const char* provider_unavailable = "provider_unavailable";  // discovery, token endpoint or keys unreachable
inline constexpr const char* busy = "busy";                      // too many sign-ins under way
inline constexpr const char* internal = "internal";              // sandfortd's own failure (its store)
}  // namespace login_error
// Whether `code` is one of them.
bool is_login_error(std::string_view code);

struct console_login_limits {
  std::chrono::seconds pending_lifetime{300};  // from start to callback
  std::size_t pending_per_source = 20;         // begun and not ended, per client address (the oldest end)
  std::size_t pending_total = 10000;           // in all: beyond, start answers busy
  std::size_t max_code_bytes = 2048;
};

class console_login {
 public:
  console_login(const oidc_config& cfg, oidc_verifier& verifier, store::database& db, const clock& clk,
                form_poster post, console_login_limits limits = {});
  ~console_login();
  console_login(const console_login&) = delete;
  console_login& operator=(const console_login&) = delete;

  // The issuers configured with console_client_id, in the configuration's order.
  std::vector<console_issuer> issuers() const;

  // Begins a sign-in with the issuer whose key is `issuer_id`, to come back to `redirect_uri`,
  // for a browser at `source`. invalid_argument for an unknown issuer.
  boost::asio::awaitable<result<login_redirect>> start(std::string issuer_id, std::string redirect_uri,
                                                       std::string source, std::string request_id);

  // Ends the sign-in the callback names. Every failure's message is a login_error code.
  boost::asio::awaitable<result<proven_identity>> finish(login_callback callback, std::string request_id);

 private:
  // An issuer's endpoints, from its discovery document (the verifier keeps it).
  struct provider {
    std::string authorization_endpoint;
    std::string token_endpoint;
    bool sends_iss = false;  // authorization_response_iss_parameter_supported (RFC 9207)
  };
  const oidc_issuer_config* console_issuer_config(const std::string& issuer) const;
  boost::asio::awaitable<result<provider>> endpoints(const oidc_issuer_config& is, const std::string& request_id);
  boost::asio::awaitable<result<nlohmann::json>> redeem(const oidc_issuer_config& is, const provider& p,
                                                        const std::string& code, const std::string& redirect_uri,
                                                        const std::string& verifier, const std::string& request_id);

  const oidc_config& cfg_;
  oidc_verifier& verifier_;
  store::database& db_;
  const clock& clk_;
  form_poster post_;
  console_login_limits limits_;
};

}  // namespace sandfort::auth
