#pragma once
// Console sessions (docs/console.md): a browser signs in once with an API key, or through an
// identity provider (console_login.hpp), and holds a cookie instead of the credential. Every
// request with a key's cookie is that key's principal, checked as the key itself would be
// (revoked, expired, its organization disabled: the session opens nothing). A provider's session
// has no credential left to check: it is the principal the provider proved, kept until the access
// token's own expiry, its organization checked on every request. Either way principal::
// console_session and console_csrf are set so that the guard can demand the CSRF token and an
// Origin of the console itself for anything that changes something.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "sandfort/auth/principal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/http/cookie.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::auth {

// The cookie's name (sandfort/http/cookie.hpp).
using http::console_cookie;
using http::console_cookie_secure;
// How the API's guard hands a cookie's value to the authenticator, in place of an Authorization
// header's value: "Console <cookie>".
inline constexpr std::string_view console_scheme = "Console ";
// The header a changing request carries the session's CSRF token in.
inline constexpr const char* console_csrf_header = "X-Sandfort-CSRF";

struct console_session_options {
  std::chrono::seconds lifetime{8 * 3600};
  std::size_t per_credential = 20;  // sessions one key holds at once; beyond, the oldest end
};

struct console_grant {
  std::string cookie;      // 32 random bytes as hex: the secret; only its SHA-256 is stored
  std::string csrf_token;  // 16 random bytes as hex
  std::string expires_at;  // never later than the key's own expiry
};

// A session for the principal an API key authenticated as (the caller authenticated it).
result<console_grant> open_console_session(store::database& db, const clock& clk, const console_session_options& o,
                                           const principal& who, const std::string& api_key);

// A session for the principal an identity provider proved at the console's sign-in: until the
// access token's expiry, never longer than o.lifetime; at most o.per_credential per user
// ("oidc:<sub>@<issuer>").
result<console_grant> open_identity_console_session(store::database& db, const clock& clk,
                                                    const console_session_options& o, const principal& who,
                                                    time_point token_expires_at);

// Whether sessions made through an issuer still open anything: one that is no longer configured
// for console sign-in ends its sessions (oidc_verifier::offers_console_sign_in).
using console_issuer_check = std::function<bool(const std::string& issuer)>;

// The principal of a cookie's value: unauthenticated when it is malformed, unknown or expired,
// and whatever the key's own check says otherwise; for a provider's session, what its
// organization's state says (gone: unauthenticated; disabled: permission_denied). Without
// `issuer_offered` no provider's session opens anything.
result<principal> authenticate_console(store::database& db, const clock& clk, const std::string& cookie,
                                       const console_issuer_check& issuer_offered = {});

// Ends the session whose SHA-256 is principal::console_session.
result<void> close_console_session(store::database& db, const principal& who);

// The session cookie among a Cookie header's pairs ("a=1; sandfort_session=…"), or empty.
std::string console_cookie_of(std::string_view cookie_header);

}  // namespace sandfort::auth
