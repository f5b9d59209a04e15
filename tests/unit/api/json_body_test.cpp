#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <optional>

#include "json_body.hpp"

using nlohmann::json;
using sandfort::api::read;

namespace {

std::optional<std::int64_t> int_field(const char* body, bool& ok) {
  std::optional<std::int64_t> out;
  ok = read(json::parse(body), "ttl_s", out).ok();
  return out;
}

}  // namespace

TEST_CASE("json body: integers, and floats that are whole numbers, read as int64", "[api][json_body]") {
  bool ok = false;
  CHECK(int_field(R"({"ttl_s": 60})", ok) == 60);
  CHECK(ok);
  CHECK(int_field(R"({"ttl_s": 3.0})", ok) == 3);
  CHECK(ok);
  CHECK(int_field(R"({"ttl_s": -9223372036854775808})", ok) == std::numeric_limits<std::int64_t>::min());
  CHECK(ok);
  CHECK(int_field(R"({"ttl_s": 9223372036854775807})", ok) == std::numeric_limits<std::int64_t>::max());
  CHECK(ok);
  CHECK(int_field(R"({"ttl_s": null})", ok) == std::nullopt);
  CHECK(ok);
}

TEST_CASE("json body: numbers outside int64 are refused, not wrapped or cast out of range", "[api][json_body]") {
  // Found by tests/fuzz/fuzz_api_json: 1e300 was cast to int64 (undefined behaviour) and
  // 2^64-1 read as -1.
  for (const char* body : {R"({"ttl_s": 1e300})", R"({"ttl_s": -1e300})", R"({"ttl_s": 9223372036854775808.0})",
                           R"({"ttl_s": 18446744073709551615})", R"({"ttl_s": 9223372036854775808})",
                           R"({"ttl_s": 1.5})", R"({"ttl_s": "60"})", R"({"ttl_s": true})"}) {
    INFO(body);
    bool ok = true;
    CHECK(int_field(body, ok) == std::nullopt);
    CHECK_FALSE(ok);
  }
  std::optional<std::int64_t> out;
  auto r = read(json::parse(R"({"ttl_s": 1e300})"), "ttl_s", out);
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == sandfort::errc::invalid_argument);
  CHECK(r.err().message.find("ttl_s") != std::string::npos);
}
