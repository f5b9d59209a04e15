#pragma once
// Console sessions (docs/console.md): a browser signs in once with an API key and holds a cookie
// instead of the key. Every request with the cookie is that key's principal, checked as the key
// itself would be (revoked, expired, its organization disabled: the session opens nothing), with
// principal::console_session and console_csrf set so that the guard can demand the CSRF token and
// an Origin of the console itself for anything that changes something.

#include <chrono>
#include <cstddef>
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

// The principal of a cookie's value: unauthenticated when it is malformed, unknown or expired,
// and whatever the key's own check says otherwise.
result<principal> authenticate_console(store::database& db, const clock& clk, const std::string& cookie);

// Ends the session whose SHA-256 is principal::console_session.
result<void> close_console_session(store::database& db, const principal& who);

// The session cookie among a Cookie header's pairs ("a=1; sandfort_session=…"), or empty.
std::string console_cookie_of(std::string_view cookie_header);

}  // namespace sandfort::auth
