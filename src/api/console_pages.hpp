#pragma once
// The console's pages (docs/console.md): /console/ and the files it loads, served from the binary
// beside the API on the same origin, so that the session cookie and the API need no CORS. The
// headers forbid everything the page does not need: no inline script, no other origin, no frame.

#include <optional>

#include "sandfort/http/message.hpp"

namespace sandfort::api {

// The answer for a path under /console, or nullopt for any other path.
std::optional<http::response> console_page(const http::context& ctx);

}  // namespace sandfort::api
