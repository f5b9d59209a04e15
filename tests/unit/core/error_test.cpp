#include <catch2/catch.hpp>

#include "sandfort/core/error.hpp"

using namespace sandfort;

TEST_CASE("every error class maps to its documented status and wire name") {
  CHECK(http_status(errc::invalid_argument) == 400);
  CHECK(http_status(errc::unauthenticated) == 401);
  CHECK(http_status(errc::permission_denied) == 403);
  CHECK(http_status(errc::not_found) == 404);
  CHECK(http_status(errc::conflict) == 409);
  CHECK(http_status(errc::payload_too_large) == 413);
  CHECK(http_status(errc::rate_limited) == 429);
  CHECK(http_status(errc::internal) == 500);
  CHECK(http_status(errc::unavailable) == 503);
  CHECK(to_string(errc::not_found) == "not_found");
  CHECK(to_string(errc::payload_too_large) == "payload_too_large");
  CHECK(http_status(errc::image_not_allowed) == 403);
  CHECK(http_status(errc::runtime_not_allowed) == 403);
  CHECK(to_string(errc::runtime_not_allowed) == "runtime_not_allowed");
}

TEST_CASE("result holds a value or an error") {
  result<int> good = 7;
  REQUIRE(good.ok());
  CHECK(*good == 7);
  result<int> bad = make_error(errc::conflict, "busy");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().code == errc::conflict);
  CHECK(bad.err().message == "busy");
  result<void> fine;
  CHECK(fine.ok());
  result<void> broken = make_error(errc::internal, "x");
  CHECK_FALSE(broken.ok());
}
