#include <catch2/catch.hpp>

#include "engine_errors.hpp"

using namespace sandfort;
using namespace sandfort::docker::detail;

TEST_CASE("engine statuses map to error classes with Docker's message") {
  auto e = status_error(404, R"({"message":"No such container: abc"})", "inspect container abc");
  CHECK(e.code == errc::not_found);
  CHECK_THAT(e.message, Catch::Contains("inspect container abc"));
  CHECK_THAT(e.message, Catch::Contains("No such container: abc"));
  CHECK(status_error(409, R"({"message":"name in use"})", "x").code == errc::conflict);
  CHECK(status_error(400, R"({"message":"bad"})", "x").code == errc::invalid_argument);
  CHECK(status_error(500, R"({"message":"oci runtime error"})", "x").code == errc::internal);
  CHECK(status_error(403, "{}", "x").code == errc::internal);
  CHECK(status_error(503, "", "x").code == errc::unavailable);
  CHECK_THAT(status_error(502, "  bad gateway\n", "x").message, Catch::Contains("bad gateway"));
}

TEST_CASE("transport failures say Docker is unreachable at the socket") {
  auto e = transport_error("/run/nope.sock", make_error(errc::unavailable, "cannot connect: No such file"));
  CHECK(e.code == errc::unavailable);
  CHECK_THAT(e.message, Catch::Contains("Docker is unreachable at /run/nope.sock"));
  CHECK_THAT(e.message, Catch::Contains("No such file"));
}

TEST_CASE("a pull stream that ends in an error line is a failure even with HTTP 200") {
  // Recorded from Docker 20.10 pulling a tag that does not exist.
  const char* failed =
      "{\"status\":\"Pulling from library/debian\",\"id\":\"nosuch\"}\r\n"
      "{\"errorDetail\":{\"message\":\"manifest for debian:nosuch not found: manifest unknown: manifest unknown\"},"
      "\"error\":\"manifest for debian:nosuch not found: manifest unknown: manifest unknown\"}\r\n";
  CHECK(pull_failure_reason(failed) == "manifest for debian:nosuch not found: manifest unknown: manifest unknown");

  const char* only_detail = "{\"errorDetail\":{\"message\":\"unexpected EOF\"}}\n";
  CHECK(pull_failure_reason(only_detail) == "unexpected EOF");

  const char* succeeded =
      "{\"status\":\"Pulling from sandfort/pulltest\",\"id\":\"1\"}\r\n"
      "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":10,\"total\":20},\"id\":\"abc\"}\r\n"
      "{\"status\":\"Digest: sha256:00\"}\r\n"
      "{\"status\":\"Status: Downloaded newer image for 127.0.0.1:5000/sandfort/pulltest:1\"}\r\n";
  CHECK(pull_failure_reason(succeeded).empty());
  CHECK(pull_failure_reason("").empty());
  CHECK(pull_failure_reason("not json\n{\"status\":\"x\"}").empty());
}

TEST_CASE("pull errors name the image and are classed by the engine's reason") {
  auto absent = pull_error("nosuch/image:1",
                           "pull access denied for nosuch/image, repository does not exist or may require 'docker login'");
  CHECK(absent.code == errc::not_found);
  CHECK_THAT(absent.message, Catch::StartsWith("image \"nosuch/image:1\" could not be pulled: pull access denied"));
  CHECK(pull_error("debian:nosuch", "manifest for debian:nosuch not found: manifest unknown").code == errc::not_found);
  CHECK(pull_error("x/y:1", "repository name not known to registry: NAME_UNKNOWN: name unknown").code == errc::not_found);
  auto down = pull_error("localhost:1/nosuch:0",
                         "Get \"http://localhost:1/v2/\": dial tcp [::1]:1: connect: connection refused");
  CHECK(down.code == errc::unavailable);
  CHECK_THAT(down.message, Catch::Contains("localhost:1/nosuch:0"));
  CHECK_THAT(down.message, Catch::Contains("connection refused"));
}
