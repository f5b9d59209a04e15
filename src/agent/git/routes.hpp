#pragma once
// The HTTP surface of Git: POST /git/{op} for clone, pull, push, add, commit, checkout,
// branches and status. Each runs the sandbox's own `git` once and answers its exit code and
// output, plus what was parsed from it (status, branches).

#include <vector>

#include "sandfort/http/router.hpp"

namespace sandfort::agent::git {

std::vector<http::route> routes();

}  // namespace sandfort::agent::git
