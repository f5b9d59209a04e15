// The exec answer written field by field is byte for byte the JSON the API always wrote.
#include <catch2/catch.hpp>

#include "sandbox_bodies.hpp"
#include "sandfort/http/message.hpp"

using namespace sandfort;

TEST_CASE("exec answer: the text written field by field is exec_json's, byte for byte") {
  sandbox::exec_result whole{-3, "out \"q\" \\ \n\t\x01\x7f é \xff\xfe end", std::string("err\0x", 5), "b3V0", std::nullopt,
                             1234567890123, true, false, true};
  sandbox::exec_result plain{0, "", "", std::nullopt, std::nullopt, 0, false, true, false};
  sandbox::exec_result both{7, std::string(300000, 'x') + "\xc3", "e", "QQ==", "Qg==", 1, false, false, false};
  for (const auto& r : {whole, plain, both}) {
    auto a = r, b = r;
    CHECK(api::exec_answer_text(std::move(a)) == http::json_response(200, api::exec_json(std::move(b))).body());
  }
}
