#pragma once
// Cookie headers ("a=1; name=x; b=2"): finding one cookie and taking it out. The two listeners
// that meet browsers use it: the API reads the console's session cookie
// (auth/console_sessions.hpp), and the preview router takes its own token cookie and the
// console's out of what it passes to a sandbox's application.

#include <string>
#include <string_view>
#include <vector>

namespace sandfort::http {

// The console's session cookie (docs/console.md): `__Host-` when it is Secure (the browser then
// refuses it from any other host and over plain HTTP).
inline constexpr const char* console_cookie = "sandfort_session";
inline constexpr const char* console_cookie_secure = "__Host-sandfort_session";
// The pre-login cookie of a sign-in through an identity provider (docs/console.md): SameSite=Lax,
// since the provider's redirect back is a cross-site navigation; it opens nothing by itself.
inline constexpr const char* console_login_cookie = "sandfort_login";
inline constexpr const char* console_login_cookie_secure = "__Host-sandfort_login";

struct cookie_split {
  std::string rest;                 // the header without them ("" when nothing is left)
  std::vector<std::string> values;  // the values of every cookie called name, in order, unquoted
};
// Removes every cookie called name from a Cookie header's value; the others keep their order.
cookie_split take_cookie(std::string_view cookie_header, std::string_view name);

}  // namespace sandfort::http
