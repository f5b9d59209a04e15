#include <catch2/catch.hpp>

#include "engine_errors.hpp"

using namespace sandfort;
using namespace sandfort::docker::detail;

TEST_CASE("engine statuses map to error classes, Docker's own message is not passed on") {
  auto e = status_error(404, R"({"message":"No such container: abc"})", "inspect container abc");
  CHECK(e.code == errc::not_found);
  CHECK(e.message == "inspect container abc: Docker answered HTTP 404 (not found)");
  CHECK(status_error(409, R"({"message":"name in use"})", "x").code == errc::conflict);
  CHECK(status_error(400, R"({"message":"bad"})", "x").code == errc::invalid_argument);
  CHECK(status_error(500, R"({"message":"oci runtime error"})", "x").code == errc::internal);
  CHECK(status_error(403, "{}", "x").code == errc::internal);
  CHECK(status_error(503, "", "x").code == errc::unavailable);
  for (const char* body : {R"({"message":"mount /srv/secret/path: SECRET-42"})", "  SECRET-42 bad gateway\n"}) {
    auto hidden = status_error(502, body, "x");
    CHECK_THAT(hidden.message, !Catch::Contains("SECRET-42"));
    CHECK_THAT(hidden.message, Catch::Contains("HTTP 502"));
  }
}

TEST_CASE("engine_message reads Docker's message or a trimmed raw body (for the log)") {
  CHECK(engine_message(R"({"message":"No such container: abc"})") == "No such container: abc");
  CHECK(engine_message("  bad gateway\n") == "bad gateway");
  CHECK(engine_message("") == "no details given");
  CHECK(engine_message(std::string(400, 'x')).size() == 303);
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

TEST_CASE("pull errors name the image and a reason class, never the engine's text") {
  auto absent = pull_error("nosuch/image:1",
                           "pull access denied for nosuch/image, repository does not exist or may require 'docker login'");
  CHECK(absent.code == errc::not_found);
  CHECK(absent.message == "image \"nosuch/image:1\" could not be pulled: not found (details in sandfortd's log)");
  CHECK(pull_error("debian:nosuch", "manifest for debian:nosuch not found: manifest unknown").code == errc::not_found);
  CHECK(pull_error("x/y:1", "repository name not known to registry: NAME_UNKNOWN: name unknown").code == errc::not_found);
  auto down = pull_error("localhost:1/nosuch:0",
                         "Get \"http://localhost:1/v2/\": dial tcp [::1]:1: connect: connection refused");
  CHECK(down.code == errc::unavailable);
  CHECK_THAT(down.message,
             Catch::StartsWith("image \"localhost:1/nosuch:0\" could not be pulled: registry unreachable"));
  CHECK_THAT(down.message, !Catch::Contains("connection refused"));
}

TEST_CASE("what a registry answers stays out of the error, whatever the engine wraps it in") {
  // Recorded from Docker 20.10 pulling from registries that answer with a body of their choice.
  const char* echoed[] = {
      "unknown: SECRET-BODY-42 token=abc",  // 401 or 404 with {"errors":[{"code":"UNKNOWN","message":...}]}
      "error parsing HTTP 404 response body: invalid character 'S' looking for beginning of value: "
      "\"SECRET-BODY-42 plain text token=abc\"",
      "received unexpected HTTP status: 500 Internal Server Error SECRET-BODY-42",
      "unauthorized: SECRET-BODY-42",
      "manifest unknown: SECRET-BODY-42",
  };
  for (const char* reason : echoed) {
    INFO(reason);
    auto e = pull_error("127.0.0.1:5000/x:1", reason);
    CHECK_THAT(e.message, !Catch::Contains("SECRET"));
    CHECK_THAT(e.message, !Catch::Contains("token"));
    CHECK_THAT(e.message, Catch::Contains("127.0.0.1:5000/x:1"));
  }
}

TEST_CASE("pull failures fall into classes") {
  CHECK(classify_pull_failure("unknown: whatever the registry says") == pull_failure::registry_error);
  CHECK(classify_pull_failure("received unexpected HTTP status: 500 Internal Server Error") ==
        pull_failure::registry_error);
  CHECK(classify_pull_failure("unauthorized: authentication required") == pull_failure::unauthorized);
  CHECK(classify_pull_failure("Get \"https://r.example/v2/\": dial tcp: lookup r.example: no such host") ==
        pull_failure::registry_unreachable);
  CHECK(classify_pull_failure("Get \"https://r.example/v2/\": x509: certificate signed by unknown authority") ==
        pull_failure::registry_unreachable);
  CHECK(classify_pull_failure("Get \"https://r.example/v2/\": net/http: request canceled while waiting for "
                              "connection (Client.Timeout exceeded while awaiting headers)") ==
        pull_failure::timed_out);
  CHECK(classify_pull_failure("Docker is unreachable at /run/docker.sock: cannot connect to /run/docker.sock: "
                              "No such file or directory") == pull_failure::docker_unreachable);
  CHECK(classify_pull_failure("Docker is unreachable at /run/docker.sock: no answer from /run/docker.sock within "
                              "600000 ms") == pull_failure::timed_out);
  CHECK(classify_pull_failure("invalid reference format") == pull_failure::invalid_reference);
  CHECK(pull_error("x", "unauthorized: authentication required").code == errc::permission_denied);
  CHECK(pull_error("x", "invalid reference format").code == errc::invalid_argument);
  CHECK(pull_error("x", "received unexpected HTTP status: 502 Bad Gateway").code == errc::unavailable);
}
