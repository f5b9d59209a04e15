// The exec answer written field by field is byte for byte the JSON object the API always wrote.
#include <catch2/catch.hpp>

#include "sandbox_bodies.hpp"
#include "sandfort/http/message.hpp"

using namespace sandfort;

namespace {

// The answer as it was built before (one JSON object, dumped whole).
nlohmann::json as_object(const sandbox::exec_result& r) {
  nlohmann::json j = {{"exit_code", r.exit_code}, {"stdout", r.stdout_text}, {"stderr", r.stderr_text},
                      {"duration_ms", r.duration_ms}, {"timed_out", r.timed_out}, {"truncated", r.truncated},
                      {"oom_killed", r.oom_killed}};
  if (r.stdout_b64) j["stdout_b64"] = *r.stdout_b64;
  if (r.stderr_b64) j["stderr_b64"] = *r.stderr_b64;
  return j;
}

}  // namespace

TEST_CASE("exec answer: the text written field by field is the JSON object's, byte for byte") {
  sandbox::exec_result whole{-3, "out \"q\" \\ \n\t\x01\x7f é \xff\xfe end", std::string("err\0x", 5), "b3V0", std::nullopt,
                             1234567890123, true, false, true};
  sandbox::exec_result plain{0, "", "", std::nullopt, std::nullopt, 0, false, true, false};
  sandbox::exec_result both{7, std::string(300000, 'x') + "\xc3", "e", "QQ==", "Qg==", 1, false, false, false};
  for (const auto& r : {whole, plain, both}) {
    auto taken = r;
    CHECK(api::exec_answer_text(std::move(taken)) == http::json_response(200, as_object(r)).body());
  }
}
