#pragma once
// The name of the console's session cookie (docs/console.md), known to the two listeners that
// meet it: the API, which reads it (auth/console_sessions.hpp), and the preview router, which
// never passes it to a sandbox's application.

namespace sandfort::http {

// `__Host-` when it is Secure (the browser then refuses it from any other host and over HTTP).
inline constexpr const char* console_cookie = "sandfort_session";
inline constexpr const char* console_cookie_secure = "__Host-sandfort_session";

}  // namespace sandfort::http
