#pragma once
// The JSON bodies of the sandbox routes, read into requests. A field the route does not know, or
// one of the wrong type, is an invalid_argument error that names it. Apart from the routes (and the
// service behind them) so that fuzz_api_json reads bodies exactly as the API does.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/sandbox/types.hpp"

namespace sandfort::api {

result<sandbox::create_request> parse_create(std::string_view body);       // POST /v1/sandboxes
result<sandbox::update_request> parse_update(std::string_view body);       // PATCH /v1/sandboxes/{id}
result<sandbox::exec_request> parse_exec(std::string_view body);           // exec, whole and streamed
result<sandbox::code_run_request> parse_code_run(std::string_view body);   // code-run, whole and streamed

// The answer of exec and code-run. Takes the result apart: output may be megabytes, and it is
// moved, not copied, into the answer.
nlohmann::json exec_json(sandbox::exec_result&& r);
// The same answer's bytes, exactly as exec_json(r).dump() with invalid UTF-8 replaced, each string
// encoded and freed in turn: at its peak it holds the answer's text and the strings not yet
// encoded, never all the strings and all their encodings at once.
std::string exec_answer_text(sandbox::exec_result&& r);

}  // namespace sandfort::api
