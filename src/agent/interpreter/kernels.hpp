#pragma once
// The kernels the agent writes into a sandbox when a code context starts (contexts.hpp has the
// protocol): kernel.py and kernel.js beside this file, embedded at build time.

#include <string_view>

namespace sandfort::agent::interpreter {

std::string_view python_kernel();
std::string_view js_kernel();

}  // namespace sandfort::agent::interpreter
