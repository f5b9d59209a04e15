#pragma once
// The HTTP surface of background commands: POST/GET /commands, GET /commands/{cmd},
// GET /commands/{cmd}/logs (with ?follow=true as server-sent events until it exits),
// POST /commands/{cmd}/stdin (raw body; ?eof=true closes it after) and
// POST /commands/{cmd}/kill {"signal"}.

#include <vector>

#include "sandfort/http/router.hpp"
#include "sandfort/http/stream.hpp"

namespace sandfort::agent {

std::vector<http::route> command_routes();
std::vector<http::stream_route> command_stream_routes();

}  // namespace sandfort::agent
