#pragma once
// GET /ports: the TCP ports listening inside the sandbox.

#include <vector>

#include "sandfort/http/router.hpp"

namespace sandfort::agent::ports {

std::vector<http::route> routes();

}  // namespace sandfort::agent::ports
