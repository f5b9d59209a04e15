// The agent's answers as sandfortd reads them. The agent runs inside the sandbox, where root is
// the attacker: these bytes are hostile (also fuzzed: tests/fuzz/fuzz_agent_answers.cpp).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "agent_answers.hpp"

using nlohmann::json;
using namespace sandfort;
using namespace sandfort::sandbox::detail;

TEST_CASE("agent answers: a port list keeps ports 1-65535 and their details", "[sandbox][agent_answers]") {
  auto ports = parse_port_list(
      R"({"items":[{"port":8080,"address":"0.0.0.0","family":"ipv4","pid":7,"process":"python3"},)"
      R"({"port":0},{"port":65536},{"port":4294975376},{"port":-1},{"port":22,"pid":"x","address":5}]})");
  REQUIRE(ports.ok());
  REQUIRE(ports->size() == 2);
  CHECK((*ports)[0].port == 8080);
  CHECK((*ports)[0].address == "0.0.0.0");
  CHECK((*ports)[0].process == "python3");
  CHECK((*ports)[0].pid == 7);
  CHECK((*ports)[1].port == 22);  // fields of the wrong type are left out, the port kept
  CHECK((*ports)[1].address.empty());
}

TEST_CASE("agent answers: a malformed port list is the agent's fault", "[sandbox][agent_answers]") {
  for (const char* body : {"", "null", "[]", "{}", R"({"items":{}})", R"({"items":[1]})", R"({"items":[{"port":"80"}]})",
                           R"({"items":[{"port":80.5}]})", "{\"items\":[", "\xff\xfe"}) {
    INFO(body);
    auto ports = parse_port_list(body);
    REQUIRE_FALSE(ports.ok());
    CHECK(ports.err().code == errc::internal);
  }
}

TEST_CASE("agent answers: an exec result needs an integer exit code, the rest is optional", "[sandbox][agent_answers]") {
  json j = json::parse(R"({"exit_code":3,"stdout":"out","stderr":7,"duration_ms":"5","timed_out":"yes","truncated":true})");
  auto r = exec_result_from(j);
  REQUIRE(r.ok());
  CHECK(r->exit_code == 3);
  CHECK(r->stdout_text == "out");
  CHECK(r->stderr_text.empty());
  CHECK(r->duration_ms == 0);
  CHECK_FALSE(r->timed_out);
  CHECK(r->truncated);
  for (const char* body : {"null", "[]", "{}", R"({"exit_code":"0"})", R"({"exit_code":1.5})"}) {
    INFO(body);
    json bad = json::parse(body);
    auto e = exec_result_from(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.err().code == errc::internal);
  }
}

TEST_CASE("agent answers: an error body's message is kept, bounded, the status picks the class", "[sandbox][agent_answers]") {
  auto caller = agent_error(400, R"({"error":{"code":"invalid_argument","message":"cwd does not exist"}})");
  CHECK(caller.code == errc::invalid_argument);
  CHECK(caller.message == "cwd does not exist");
  auto huge = agent_error(500, R"({"error":{"message":")" + std::string(100000, 'a') + R"("}})");
  CHECK(huge.code == errc::internal);
  CHECK(huge.message.size() == 4096);
  // A 401 or 404 from the agent is the agent failing, not the caller's credential or resource.
  CHECK(agent_error(404, "{}").code == errc::internal);
  CHECK(agent_error(401, "").message == "agent answered 401");
  CHECK(agent_error(500, R"({"error":{"message":7}})").message == "agent answered 500");
}

TEST_CASE("agent answers: an exec answer read from its bytes is what json::parse and exec_result_from make of them",
          "[sandbox][agent_answers]") {
  const char* bodies[] = {
      R"({"exit_code":3,"stdout":"out","stderr":"err","stdout_b64":"b3V0","stderr_b64":"ZXJy","duration_ms":5,"timed_out":false,"truncated":true,"oom_killed":true})",
      R"({"exit_code":0,"stdout":"a\u0000\ud83d\ude00\n","stdout_b64":{"nested":["x",{"stdout":"no"}]},"stderr":[1,2]})",
      R"({"exit_code":1,"stdout":"first","stdout":"last","exit_code":2})",  // duplicates: the last wins
      R"({"exit_code":18446744073709551615})", R"({"exit_code":-7,"duration_ms":1e3})",
      R"({"stdout":"x"})", "null", "[]", "{}", "7", R"("exit_code")", R"([{"exit_code":0}])",
      R"({"exit_code":0,"stdout":"unterminated)", "{\"exit_code\":0,\"stdout\":\"\xff\"}", "", "{\"exit_code\":0} trailing",
      R"({"exit_code":0,"x":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]})"};
  for (const char* body : bodies) {
    INFO(body);
    json j = json::parse(body, nullptr, false);
    auto want = exec_result_from(j);
    auto got = parse_exec_answer(body);
    REQUIRE(got.ok() == want.ok());
    if (!want.ok()) {
      CHECK(got.err().message == want.err().message);
      continue;
    }
    CHECK(got->exit_code == want->exit_code);
    CHECK(got->stdout_text == want->stdout_text);
    CHECK(got->stderr_text == want->stderr_text);
    CHECK(got->stdout_b64 == want->stdout_b64);
    CHECK(got->stderr_b64 == want->stderr_b64);
    CHECK(got->duration_ms == want->duration_ms);
    CHECK(got->timed_out == want->timed_out);
    CHECK(got->truncated == want->truncated);
    CHECK(got->oom_killed == want->oom_killed);
  }
}

TEST_CASE("agent answers: a large exec answer is read whole while its pages are given back", "[sandbox][agent_answers]") {
  std::string out(3u << 20, 'o');
  for (std::size_t i = 0; i < out.size(); i += 4099) out[i] = '\n';
  std::string err(5u << 20, 'e');
  json answer = {{"exit_code", 0}, {"stdout", out}, {"stderr", err}, {"stdout_b64", std::string(1u << 20, 'A')},
                 {"truncated", true}};
  auto r = parse_exec_answer(answer.dump());
  REQUIRE(r.ok());
  CHECK(r->stdout_text == out);
  CHECK(r->stderr_text == err);
  CHECK(r->stdout_b64 == std::string(1u << 20, 'A'));
  CHECK(r->truncated);
}
