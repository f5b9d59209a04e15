#pragma once
// GET /pty: an interactive terminal over a WebSocket (see session.hpp for the protocol).

#include <vector>

#include "sandfort/http/stream.hpp"

namespace sandfort::agent::pty {

std::vector<http::stream_route> stream_routes();

}  // namespace sandfort::agent::pty
