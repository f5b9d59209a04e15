#pragma once
// The agent's HTTP surface, as data: GET /health and POST /exec.

#include <vector>

#include "sandfort/http/router.hpp"

namespace sandfort::agent {

std::vector<http::route> routes();

}  // namespace sandfort::agent
