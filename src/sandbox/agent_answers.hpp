#pragma once
// The agent's answers as sandfortd reads them: pure functions over the bytes a (possibly hostile)
// agent sent, so they are unit-tested and fuzzed (tests/fuzz/fuzz_agent_answers.cpp) without a
// container.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/sandbox/types.hpp"

namespace sandfort::sandbox::detail {

// An error body in the API's own shape → its message (at most 4 KiB); the class from the status.
error agent_error(unsigned status, const std::string& body);
// The answer of POST /process/exec, parsed; its strings are moved out of j.
result<exec_result> exec_result_from(nlohmann::json& j);
// The same from the answer's bytes, which it frees once parsed: at its peak it holds the bytes
// and the strings parsed out of them, nothing more (the same result as json::parse and
// exec_result_from, for any input).
result<exec_result> parse_exec_answer(std::string body);
// The answer of GET /ports; ports outside 1..65535 are dropped.
result<std::vector<listening_port>> parse_port_list(std::string_view body);

}  // namespace sandfort::sandbox::detail
