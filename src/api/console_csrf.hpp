#pragma once
// The console's CSRF rule (docs/console.md, "Security"): a request that came with the console's
// session cookie may read (GET, HEAD); anything else — a change, or a WebSocket (a terminal) —
// must come from a page of the console itself: an Origin header naming the host the request was
// sent to, and for a change also the session's CSRF token in X-Sandfort-CSRF. SameSite=Strict is
// not enough alone: a preview's page (a sandbox's own web server) may be on the same site.

#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/http/message.hpp"

namespace sandfort::api {

// permission_denied, saying what is missing, unless the request passes the rule.
result<void> console_request_allowed(http::verb method, const http::bhttp::fields& headers, const std::string& csrf);

}  // namespace sandfort::api
