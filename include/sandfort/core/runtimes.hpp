#pragma once
// A list of sandbox runtimes (runc, gvisor) as a runtime policy holds it: the configured default
// (guardrails.allowed_runtimes) and an organization's own go through the one check.

#include <string>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort {

// At least one runtime, each runc or gvisor and named once, and not gvisor alone where gVisor is
// not offered (`gvisor_runtime` empty): such a list would refuse every create. invalid_argument,
// the message without a prefix (the caller names the setting).
result<void> check_runtime_list(const std::vector<std::string>& runtimes, const std::string& gvisor_runtime);

}  // namespace sandfort
