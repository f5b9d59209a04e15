#pragma once
// The JSON of POST /exec: request body → exec_request, exec_result → response body.

#include <nlohmann/json.hpp>
#include <chrono>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include "process/runner.hpp"
#include "sandfort/core/base64.hpp"
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

// Holds a one-shot exec to the agent's maxima (its --max-timeout-s and --output-cap): sandfortd
// never asks for more, and a request that does gets the maxima rather than a refusal, so that a
// sandbox started under older limits keeps answering.
void hold_to_limits(exec_request& req, std::chrono::milliseconds max_timeout, std::size_t output_cap);

// {"exit_code","stdout","stderr","duration_ms","timed_out","truncated"}, "oom_killed" when the
// result says (run() always does), "*_b64" too if binary.
// Output is raw bytes: dump the result with error_handler_t::replace.
nlohmann::json to_json(const exec_result& r, bool binary);

// Shared by the agent's other JSON routes. A body that is empty reads as {}; otherwise it
// must be a JSON object (invalid_argument otherwise).
result<nlohmann::json> parse_object(std::string_view body);
// invalid_argument "unknown field 'x'" for a key not in known.
result<void> check_fields(const nlohmann::json& j, std::initializer_list<std::string_view> known);
// {"KEY": "value", ...}; invalid_argument naming the field otherwise.
result<std::map<std::string, std::string>> parse_env(const nlohmann::json& v);

}  // namespace sandfort::agent
