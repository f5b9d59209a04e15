// Starts the real sandfort-agent binary on a temporary unix socket and talks HTTP to it.

#include <catch2/catch.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spawn.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "sandfort/http/client.hpp"
#include "agent_process.hpp"
#include "support.hpp"

extern char** environ;

using namespace sandfort;
using namespace sandfort::agent::test;
using nlohmann::json;
namespace asio = boost::asio;

namespace {

result<http::response> call(const std::string& socket, http::request req) {
  return run_coroutine(http::unix_request(socket, std::move(req), http::client_options{}));
}

result<http::response> call_json(const std::string& socket, http::verb method, const std::string& target,
                                 const json* body = nullptr) {
  return call(socket, http::make_request(method, target, body));
}

json body_of(const http::response& res) { return json::parse(res.body()); }

void check_invalid(const std::string& socket, const std::string& raw_body, const std::string& message_part) {
  INFO("body: " << raw_body);
  http::request req = http::make_request(http::verb::post, "/process/exec");
  req.set(http::bhttp::field::content_type, "application/json");
  req.body() = raw_body;
  auto res = call(socket, std::move(req));
  REQUIRE(res.ok());
  CHECK(res->result_int() == 400);
  json err = body_of(*res);
  CHECK(err["error"]["code"] == "invalid_argument");
  CHECK(err["error"]["message"].get<std::string>().find(message_part) != std::string::npos);
  CHECK_FALSE(err["error"]["request_id"].get<std::string>().empty());
}

}  // namespace

TEST_CASE("the agent binary serves /health and /exec on its unix socket") {
  temp_dir dir;
  // The socket's directory does not exist yet: the agent creates it.
  agent_process agent(dir / "run/agent.sock");
  REQUIRE(wait_healthy(agent.socket()));

  SECTION("health") {
    auto res = call_json(agent.socket(), http::verb::get, "/health");
    REQUIRE(res.ok());
    CHECK(res->result_int() == 200);
    json j = body_of(*res);
    CHECK(j["status"] == "ok");
    CHECK(j["version"] == "0.1.0");
    CHECK(j["pid"] == agent.pid());
  }

  SECTION("exec") {
    json body = {{"command", "echo hi; echo oops >&2; printf '\\377'; exit 3"}, {"binary", true}};
    auto res = call_json(agent.socket(), http::verb::post, "/process/exec", &body);
    REQUIRE(res.ok());
    REQUIRE(res->result_int() == 200);
    json j = body_of(*res);
    CHECK(j["exit_code"] == 3);
    CHECK(j["stdout"] == "hi\n\xef\xbf\xbd");
    CHECK(j["stdout_b64"] == "aGkK/w==");
    CHECK(j["stderr"] == "oops\n");
    CHECK(j["timed_out"] == false);
    CHECK(j["truncated"] == false);
    CHECK(j["oom_killed"] == false);
    CHECK(j["duration_ms"].is_number_integer());
  }

  SECTION("exec with argv, stdin, cwd and env") {
    json body = {{"argv", {"/bin/sh", "-c", "cat; pwd; echo $SFA_X"}},
                 {"stdin", "input\n"},
                 {"cwd", dir.path()},
                 {"env", {{"SFA_X", "from-env"}}}};
    auto res = call_json(agent.socket(), http::verb::post, "/process/exec", &body);
    REQUIRE(res.ok());
    REQUIRE(res->result_int() == 200);
    CHECK(body_of(*res)["stdout"] == "input\n" + dir.path() + "\nfrom-env\n");
  }

  SECTION("timeout") {
    json body = {{"command", "sleep 30"}, {"timeout_ms", 200}};
    auto res = call_json(agent.socket(), http::verb::post, "/process/exec", &body);
    REQUIRE(res.ok());
    json j = body_of(*res);
    CHECK(j["exit_code"] == 124);
    CHECK(j["timed_out"] == true);
  }

  SECTION("bad requests are 400 invalid_argument") {
    check_invalid(agent.socket(), "{oops", "request body is not valid JSON");
    check_invalid(agent.socket(), R"({"argv":["a"],"command":"b"})", "exactly one of argv and command");
    check_invalid(agent.socket(), R"({"argv":[]})", "argv must be a non-empty array");
    check_invalid(agent.socket(), R"({"command":"true","env":{"A":1}})", "env.A must be a string");
    check_invalid(agent.socket(), R"({"command":"true","cwd":"/nonexistent/sfa"})",
                  "cwd '/nonexistent/sfa' does not exist");
    check_invalid(agent.socket(), R"({"command":"true","timeout_ms":0})", "timeout_ms");
  }

  SECTION("unknown routes and verbs") {
    auto missing = call_json(agent.socket(), http::verb::get, "/nope");
    REQUIRE(missing.ok());
    CHECK(missing->result_int() == 404);
    auto wrong_verb = call_json(agent.socket(), http::verb::get, "/process/exec");
    REQUIRE(wrong_verb.ok());
    CHECK(wrong_verb->result_int() == 405);
  }

  SECTION("concurrent calls") {
    asio::io_context ioc{1};
    constexpr int n = 20;
    std::vector<std::string> out(n);
    for (int i = 0; i < n; ++i) {
      asio::co_spawn(
          ioc,
          [&, i]() -> asio::awaitable<void> {
            json body = {{"command", "sleep 0.1; echo call-" + std::to_string(i)}};
            auto res = co_await http::unix_request(agent.socket(),
                                                   http::make_request(http::verb::post, "/process/exec", &body), {});
            if (res.ok() && res->result_int() == 200)
              out[static_cast<std::size_t>(i)] = json::parse(res->body())["stdout"];
          },
          [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
          });
    }
    ioc.run();
    for (int i = 0; i < n; ++i) CHECK(out[static_cast<std::size_t>(i)] == "call-" + std::to_string(i) + "\n");
  }

  SECTION("SIGTERM stops it cleanly") {
    int status = agent.terminate();
    REQUIRE(status != -1);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    struct stat st {};
    CHECK(::stat(agent.socket().c_str(), &st) != 0);  // the socket is removed
  }
}

TEST_CASE("the agent says oom_killed when the cgroup's OOM killer took the command") {
  temp_dir dir;
  std::filesystem::create_directories(dir / "cg/memory");
  std::string counter = dir / "cg/memory/memory.oom_control";
  std::ofstream(counter) << "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n";
  agent_process agent(dir / "a.sock", {"--cgroup-root", dir / "cg"});
  REQUIRE(wait_healthy(agent.socket()));
  auto exec = [&](const std::string& command) {
    json body = {{"command", command}};
    auto res = call_json(agent.socket(), http::verb::post, "/process/exec", &body);
    REQUIRE(res.ok());
    REQUIRE(res->result_int() == 200);
    return body_of(*res);
  };

  json normal = exec("echo fine");
  CHECK(normal["exit_code"] == 0);
  CHECK(normal["oom_killed"] == false);

  json plain_kill = exec("kill -9 $$");
  CHECK(plain_kill["exit_code"] == 137);
  CHECK(plain_kill["oom_killed"] == false);

  // What the kernel does when the OOM killer picks it: count, then SIGKILL.
  json oom = exec("printf 'oom_kill_disable 0\\nunder_oom 1\\noom_kill 1\\n' > " + counter + "; kill -9 $$");
  CHECK(oom["exit_code"] == 137);
  CHECK(oom["oom_killed"] == true);
}

TEST_CASE("the agent refuses an empty --cgroup-root") {
  temp_dir dir;
  agent_process agent(dir / "a.sock", {"--cgroup-root="});
  int status = agent.wait_exit();
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
}
