// Finding and removing one cookie of a Cookie header (the console's session, the preview's token).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sandfort/http/cookie.hpp"

using namespace sandfort::http;

TEST_CASE("take_cookie removes one cookie and keeps the others", "[http][cookie]") {
  auto split = take_cookie("a=1; sandfort_preview_token=t1; b=2", "sandfort_preview_token");
  CHECK(split.rest == "a=1; b=2");
  REQUIRE(split.values.size() == 1);
  CHECK(split.values[0] == "t1");

  split = take_cookie("sandfort_preview_token=\"t1\";sandfort_preview_token=t2", "sandfort_preview_token");
  CHECK(split.rest.empty());
  CHECK(split.values == std::vector<std::string>{"t1", "t2"});

  split = take_cookie("xsandfort_preview_token=1; session=abc", "sandfort_preview_token");
  CHECK(split.rest == "xsandfort_preview_token=1; session=abc");
  CHECK(split.values.empty());
}

TEST_CASE("take_cookie: spacing, a pair without a value, empty pieces", "[http][cookie]") {
  auto split = take_cookie(" ;a=1;;  name = \"x\" ; name ;b", "name");
  CHECK(split.rest == "a=1; b");
  CHECK(split.values == std::vector<std::string>{"x", ""});
  CHECK(take_cookie("", "name").rest.empty());
  CHECK(take_cookie("", "name").values.empty());
}
