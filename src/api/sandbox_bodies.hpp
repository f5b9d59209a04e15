#pragma once
// The JSON bodies of the sandbox routes, read into requests. A field the route does not know, or
// one of the wrong type, is an invalid_argument error that names it. Apart from the routes (and the
// service behind them) so that fuzz_api_json reads bodies exactly as the API does.

#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/sandbox/types.hpp"

namespace sandfort::api {

result<sandbox::create_request> parse_create(std::string_view body);       // POST /v1/sandboxes
result<sandbox::update_request> parse_update(std::string_view body);       // PATCH /v1/sandboxes/{id}
result<sandbox::exec_request> parse_exec(std::string_view body);           // exec, whole and streamed
result<sandbox::code_run_request> parse_code_run(std::string_view body);   // code-run, whole and streamed

// The answer of exec and code-run: the JSON object of the result's fields (by name, as a JSON
// object orders them), invalid UTF-8 replaced. Takes the result apart: each string is encoded and
// freed in turn, so at its peak it holds the answer's text and the strings not yet encoded, never
// all the strings and all their encodings at once (output may be tens of megabytes).
std::string exec_answer_text(sandbox::exec_result&& r);

}  // namespace sandfort::api
