#pragma once
// The code interpreter's HTTP surface (docs/api.md, "Code interpreter"): contexts answered
// whole, runs as server-sent events.

#include <vector>

#include "sandfort/http/router.hpp"
#include "sandfort/http/stream.hpp"

namespace sandfort::agent::interpreter {

std::vector<http::route> routes();
std::vector<http::stream_route> stream_routes();

}  // namespace sandfort::agent::interpreter
