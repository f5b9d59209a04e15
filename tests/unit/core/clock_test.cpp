#include <catch2/catch.hpp>

#include "sandfort/core/clock.hpp"

using namespace sandfort;

TEST_CASE("times format as RFC 3339 UTC with milliseconds and parse back") {
  time_point t = time_point(std::chrono::milliseconds(1764405775123));
  auto s = format_time(t);
  CHECK(s == "2025-11-29T08:42:55.123Z");
  time_point back;
  REQUIRE(parse_time(s, back));
  CHECK(back == t);
  CHECK_FALSE(parse_time("yesterday", back));
}
