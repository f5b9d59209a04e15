#pragma once
// The agent's HTTP surface, as data. Paths mirror the public API below
// /v1/sandboxes/{id}, so sandfortd forwards by stripping that prefix.

#include <vector>

#include "sandfort/http/router.hpp"
#include "sandfort/http/stream.hpp"

namespace sandfort::agent {

using stream_route = http::stream_route;

// Requests answered whole (small JSON in and out).
std::vector<http::route> routes();
// Requests that stream: server-sent events, file bodies, the PTY's WebSocket.
std::vector<stream_route> stream_routes();

}  // namespace sandfort::agent
