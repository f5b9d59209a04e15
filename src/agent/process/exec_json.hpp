#pragma once
// The JSON of POST /exec: request body → exec_request, exec_result → response body.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "process/runner.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent {

struct exec_call {
  exec_request request;
  bool binary = false;  // also answer stdout_b64 / stderr_b64 with the raw bytes
};

// {"argv":[...]} or {"command":"..."} (exactly one; command runs as /bin/sh -c), and optional
// cwd, env, stdin, timeout_ms, max_output_bytes, binary. Unknown fields and wrong types are
// invalid_argument errors whose message names the field.
result<exec_call> parse_exec_call(std::string_view body);

// {"exit_code","stdout","stderr","duration_ms","timed_out","truncated"} (+ "*_b64" if binary).
// Output is raw bytes: dump the result with error_handler_t::replace.
nlohmann::json to_json(const exec_result& r, bool binary);

std::string base64_encode(std::string_view bytes);

}  // namespace sandfort::agent
