#include <catch2/catch.hpp>

#include "api_version.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"

using namespace sandfort;
using namespace sandfort::docker;
using detail::compare_api_versions;

namespace {

// Answers of GET /version recorded from real engines (trimmed to the fields that matter).
const char* debian_bookworm_answer = R"({"Platform":{"Name":""},"Version":"20.10.24+dfsg1","ApiVersion":"1.41",
  "MinAPIVersion":"1.12","GitCommit":"5d6db84","GoVersion":"go1.19.8","Os":"linux","Arch":"amd64"})";
const char* docker_29_answer = R"({"Platform":{"Name":"Docker Engine - Community"},"Version":"29.0.0",
  "ApiVersion":"1.52","MinAPIVersion":"1.44","Os":"linux","Arch":"amd64"})";

result<std::string> negotiate_json(const char* answer) {
  auto info = parse_version(nlohmann::json::parse(answer));
  REQUIRE(info.ok());
  return negotiate_api_version(*info);
}

}  // namespace

TEST_CASE("API versions compare as numbers, not as strings") {
  CHECK(*compare_api_versions("1.9", "1.41") < 0);
  CHECK(*compare_api_versions("1.41", "1.9") > 0);
  CHECK(*compare_api_versions("1.41", "1.41") == 0);
  CHECK(*compare_api_versions("1.47", "1.52") < 0);
  CHECK(*compare_api_versions("2.0", "1.99") > 0);
  CHECK(*compare_api_versions("1.100", "1.99") > 0);
  CHECK_FALSE(compare_api_versions("", "1.41"));
  CHECK_FALSE(compare_api_versions("1", "1.41"));
  CHECK_FALSE(compare_api_versions("1.x", "1.41"));
  CHECK_FALSE(compare_api_versions("1.41.2", "1.41"));
  CHECK_FALSE(compare_api_versions("v1.41", "1.41"));
}

TEST_CASE("Debian's engine (API 1.41) is spoken to in 1.41") {
  auto info = parse_version(nlohmann::json::parse(debian_bookworm_answer));
  REQUIRE(info.ok());
  CHECK(info->version == "20.10.24+dfsg1");
  CHECK(info->api_version == "1.41");
  CHECK(info->min_api_version == "1.12");
  auto chosen = negotiate_api_version(*info);
  REQUIRE(chosen.ok());
  CHECK(*chosen == "1.41");
}

TEST_CASE("Docker 29 (API 1.52, minimum 1.44) is spoken to in the newest version we know") {
  auto chosen = negotiate_json(docker_29_answer);
  REQUIRE(chosen.ok());
  CHECK(*chosen == newest_known_api);
  CHECK(*chosen == "1.47");
}

TEST_CASE("an engine that accepts only versions newer than we know is refused with a clear message") {
  auto chosen = negotiate_api_version({"31.0.0", "1.55", "1.48"});
  REQUIRE_FALSE(chosen.ok());
  CHECK(chosen.err().code == errc::unavailable);
  const auto& m = chosen.err().message;
  CHECK_THAT(m, Catch::Contains("1.48"));
  CHECK_THAT(m, Catch::Contains("1.47"));
  CHECK_THAT(m, Catch::Contains("31.0.0"));
  CHECK_THAT(m, Catch::Contains("upgrade Sandfort"));
}

TEST_CASE("an engine older than API 1.41 is refused with a clear message") {
  auto chosen = negotiate_api_version({"19.03.15", "1.40", "1.12"});
  REQUIRE_FALSE(chosen.ok());
  CHECK(chosen.err().code == errc::unavailable);
  const auto& m = chosen.err().message;
  CHECK_THAT(m, Catch::Contains("1.40"));
  CHECK_THAT(m, Catch::Contains("1.41"));
  CHECK_THAT(m, Catch::Contains("upgrade Docker"));
}

TEST_CASE("negotiation at the edges") {
  CHECK(*negotiate_api_version({"x", "1.47", "1.47"}) == "1.47");  // exactly ours, exactly its minimum
  CHECK(*negotiate_api_version({"x", "1.41", "1.41"}) == "1.41");
  CHECK(*negotiate_api_version({"x", "1.44", "1.24"}) == "1.44");  // "1.44" < "1.47" numerically
  CHECK(*negotiate_api_version({"x", "1.100", "1.24"}) == "1.47");
  CHECK_FALSE(negotiate_api_version({"x", "1.9", "1.9"}).ok());     // "1.9" is old, not newer than "1.41"
  CHECK_FALSE(negotiate_api_version({"x", "garbage", "1.12"}).ok());
}

TEST_CASE("parse_version rejects answers without a usable ApiVersion") {
  CHECK_FALSE(parse_version(nlohmann::json::array()).ok());
  CHECK_FALSE(parse_version(nlohmann::json::parse(R"({"Version":"1"})")).ok());
  CHECK_FALSE(parse_version(nlohmann::json::parse(R"({"ApiVersion":41})")).ok());
  CHECK_FALSE(parse_version(nlohmann::json::parse(R"({"ApiVersion":"1.41","MinAPIVersion":"old"})")).ok());
  // Very old engines did not report a minimum.
  auto old = parse_version(nlohmann::json::parse(R"({"Version":"1.13","ApiVersion":"1.41"})"));
  REQUIRE(old.ok());
  CHECK(old->min_api_version == "1.12");
}
