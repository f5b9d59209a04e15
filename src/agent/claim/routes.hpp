#pragma once
// POST /claim: a started sandbox from the warm pool becomes someone's. sandfortd sends what a
// cold create would have put in the container's configuration — the environment (the caller's
// variables and the proxy settings with this sandbox's credential) and the working directory —
// and the agent makes it the base of every process it starts from then on (exec, sessions,
// background commands, the PTY all spawn from the agent's own environment and directory).
//
// Once per agent process: a second claim is refused (409), so nothing of an earlier claim can
// be layered under a later one. A restarted container runs a new agent, claimed again.

#include <vector>

#include "sandfort/http/router.hpp"

namespace sandfort::agent::claim {

std::vector<http::route> routes();

}  // namespace sandfort::agent::claim
