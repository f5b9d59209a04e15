#pragma once
// The HTTP surface of sessions: POST/GET /sessions, DELETE /sessions/{name},
// POST /sessions/{name}/exec and POST /exec (session `default`), the last two also as
// server-sent events with `Accept: text/event-stream`.

#include <vector>

#include "sandfort/http/router.hpp"
#include "sandfort/http/stream.hpp"

namespace sandfort::agent {

std::vector<http::route> session_routes();
std::vector<http::stream_route> session_stream_routes();

}  // namespace sandfort::agent
