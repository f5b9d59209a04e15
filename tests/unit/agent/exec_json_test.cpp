#include <catch2/catch.hpp>

#include "process/exec_json.hpp"

using namespace sandfort;
using namespace sandfort::agent;
using nlohmann::json;

namespace {

std::string rejection(const std::string& body) {
  auto call = parse_exec_call(body);
  if (call.ok()) return "(accepted)";
  CHECK(call.err().code == errc::invalid_argument);
  return call.err().message;
}

}  // namespace

TEST_CASE("an argv call with every option") {
  auto call = parse_exec_call(R"({"argv":["ls","-l"],"cwd":"/tmp","env":{"A":"1"},"stdin":"x",
                                  "timeout_ms":1500,"max_output_bytes":100,"binary":true})");
  REQUIRE(call.ok());
  CHECK(call->request.argv == std::vector<std::string>{"ls", "-l"});
  CHECK(call->request.cwd == "/tmp");
  CHECK(call->request.env == std::map<std::string, std::string>{{"A", "1"}});
  CHECK(call->request.stdin_data == std::optional<std::string>("x"));
  CHECK(call->request.timeout == std::chrono::milliseconds(1500));
  CHECK(call->request.max_output_bytes == 100);
  CHECK(call->binary);
}

TEST_CASE("a command runs under /bin/sh -c, with the documented defaults") {
  auto call = parse_exec_call(R"({"command":"echo hi | wc -c"})");
  REQUIRE(call.ok());
  CHECK(call->request.argv == std::vector<std::string>{"/bin/sh", "-c", "echo hi | wc -c"});
  CHECK(call->request.cwd.empty());
  CHECK_FALSE(call->request.stdin_data.has_value());
  CHECK(call->request.timeout == std::chrono::milliseconds(60000));
  CHECK(call->request.max_output_bytes == 10485760);
  CHECK_FALSE(call->binary);
}

TEST_CASE("malformed calls are rejected with a message that names the problem") {
  CHECK(rejection("{not json").rfind("request body is not valid JSON: ", 0) == 0);
  CHECK(rejection("[1]") == "request body must be a JSON object");
  CHECK(rejection(R"({})") == "give exactly one of argv and command");
  CHECK(rejection(R"({"argv":["a"],"command":"b"})") == "give exactly one of argv and command, not both");
  CHECK(rejection(R"({"argv":[]})") == "argv must be a non-empty array of strings");
  CHECK(rejection(R"({"argv":"ls"})") == "argv must be a non-empty array of strings");
  CHECK(rejection(R"({"argv":["ls",1]})") == "argv[1] must be a string");
  CHECK(rejection(R"({"command":7})") == "command must be a string");
  CHECK(rejection(R"({"command":""})") == "command must not be empty");
  CHECK(rejection(R"({"command":"x","cwd":1})") == "cwd must be a string");
  CHECK(rejection(R"({"command":"x","env":["A"]})") == "env must be an object of strings");
  CHECK(rejection(R"({"command":"x","env":{"A":1}})") == "env.A must be a string");
  CHECK(rejection(R"({"command":"x","env":{"A":null}})") == "env.A must be a string");
  CHECK(rejection(R"({"command":"x","stdin":false})") == "stdin must be a string");
  CHECK(rejection(R"({"command":"x","timeout_ms":0})") == "timeout_ms must be an integer between 1 and 2147483647");
  CHECK(rejection(R"({"command":"x","timeout_ms":-5})") == "timeout_ms must be an integer between 1 and 2147483647");
  CHECK(rejection(R"({"command":"x","timeout_ms":1.5})") == "timeout_ms must be an integer between 1 and 2147483647");
  CHECK(rejection(R"({"command":"x","timeout_ms":"10"})") == "timeout_ms must be an integer between 1 and 2147483647");
  CHECK(rejection(R"({"command":"x","timeout_ms":18446744073709551615})") ==
        "timeout_ms must be an integer between 1 and 2147483647");
  CHECK(rejection(R"({"command":"x","max_output_bytes":-1})") ==
        "max_output_bytes must be an integer between 0 and 1073741824");
  CHECK(rejection(R"({"command":"x","binary":"yes"})") == "binary must be a boolean");
  CHECK(rejection(R"({"command":"x","timeout":5})") == "unknown field 'timeout'");
}

TEST_CASE("results map to JSON, raw bytes need binary mode to survive") {
  exec_result r;
  r.exit_code = 3;
  r.stdout_data = std::string("\xff\xfe" "abc\x80");
  r.stderr_data = "warn\n";
  r.duration = std::chrono::milliseconds(12);
  r.truncated = true;
  json j = to_json(r, true);
  CHECK(j["exit_code"] == 3);
  CHECK(j["duration_ms"] == 12);
  CHECK(j["timed_out"] == false);
  CHECK(j["truncated"] == true);
  CHECK(j["stdout_b64"] == "//5hYmOA");
  CHECK(j["stderr_b64"] == "d2Fybgo=");
  // The text form is valid UTF-8 with replacement characters.
  std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  json back = json::parse(text);
  CHECK(back["stdout"] == "\xef\xbf\xbd\xef\xbf\xbd" "abc\xef\xbf\xbd");
  CHECK(back["stderr"] == "warn\n");

  json plain = to_json(r, false);
  CHECK_FALSE(plain.contains("stdout_b64"));
  CHECK_FALSE(plain.contains("stderr_b64"));
}

TEST_CASE("oom_killed is answered when the runner watched for it") {
  exec_result r;
  r.exit_code = 137;
  CHECK_FALSE(to_json(r, false).contains("oom_killed"));  // a session's command: nobody watched
  r.oom_killed = true;
  CHECK(to_json(r, false)["oom_killed"] == true);
  r.oom_killed = false;
  CHECK(to_json(r, true)["oom_killed"] == false);
}

TEST_CASE("base64 follows RFC 4648") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("foob") == "Zm9vYg==");
  CHECK(base64_encode("fooba") == "Zm9vYmE=");
  CHECK(base64_encode("foobar") == "Zm9vYmFy");
  CHECK(base64_encode(std::string("\0\xff", 2)) == "AP8=");
}
