// POST /process/exec as server-sent events, through the real agent binary.

#include <filesystem>
#include <fstream>
#include <tuple>

#include "session_support.hpp"

using namespace sandfort;
using namespace sandfort::agent::test;
using nlohmann::json;

TEST_CASE("exec streams its output as events while the command runs") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  std::string go = dir / "go";

  raw_client c(agent.socket());
  c.post_json("/process/exec",
              json{{"command", "echo first; echo warn >&2; while [ ! -e " + go +
                                   " ]; do sleep 0.02; done; printf 'second\\r\\n\\001'; exit 4"}},
              true);
  REQUIRE(c.read_head() == 200);
  CHECK(c.head().find("text/event-stream") != std::string::npos);
  std::string out, err;
  // The command waits for our file, so this output can only have come while it ran.
  while (out.find("first\n") == std::string::npos) {
    auto e = c.next_event();
    REQUIRE(e);
    REQUIRE(e->name != "exit");
    (e->name == "stdout" ? out : err) += e->payload()["data"].get<std::string>();
  }
  std::ofstream(go).put('\n');
  std::optional<sse_event> last;
  while (auto e = c.next_event()) {
    if (e->name == "exit") {
      last = e;
      break;
    }
    REQUIRE((e->name == "stdout" || e->name == "stderr"));
    (e->name == "stdout" ? out : err) += e->payload()["data"].get<std::string>();
  }
  REQUIRE(last);
  CHECK(out == "first\nsecond\r\n\001");
  CHECK(err == "warn\n");
  auto summary = last->payload();
  CHECK(summary["exit_code"] == 4);
  CHECK(summary["timed_out"] == false);
  CHECK(summary["truncated"] == false);
  CHECK(summary["oom_killed"] == false);
  CHECK(summary["duration_ms"].is_number_integer());
  CHECK_FALSE(c.next_event());
}

TEST_CASE("streamed exec: the exit event says when the OOM killer took the command") {
  temp_dir dir;
  std::filesystem::create_directories(dir / "cg/memory");
  std::string counter = dir / "cg/memory/memory.oom_control";
  std::ofstream(counter) << "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n";
  agent_binary agent(dir / "a.sock", {"--cgroup-root", dir / "cg"});

  auto exit_event = [&](const std::string& command) {
    raw_client c(agent.socket());
    c.post_json("/process/exec", json{{"command", command}}, true);
    REQUIRE(c.read_head() == 200);
    while (auto e = c.next_event()) {
      if (e->name == "exit") return e->payload();
    }
    FAIL("no exit event");
    return json();
  };

  json plain = exit_event("echo before; kill -9 $$");
  CHECK(plain["exit_code"] == 137);
  CHECK(plain["oom_killed"] == false);

  json oom = exit_event("echo before; printf 'oom_kill 1\\n' > " + counter + "; kill -9 $$");
  CHECK(oom["exit_code"] == 137);
  CHECK(oom["oom_killed"] == true);
}

TEST_CASE("streamed exec: invalid UTF-8, split characters, binary, timeout") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");

  auto collect = [&](const json& body) {
    raw_client c(agent.socket());
    c.post_json("/process/exec", body, true);
    REQUIRE(c.read_head() == 200);
    std::vector<sse_event> events;
    while (auto e = c.next_event()) events.push_back(*e);
    REQUIRE_FALSE(events.empty());
    CHECK(events.back().name == "exit");
    return events;
  };

  SECTION("a character written in two pieces arrives whole; invalid bytes are replaced") {
    // é is C3 A9: the two bytes come in separate writes, far apart.
    auto events = collect(json{{"command", "printf '\\303'; sleep 0.2; printf '\\251 \\377'"}});
    std::string out;
    for (const auto& e : events)
      if (e.name == "stdout") {
        auto text = e.payload()["data"].get<std::string>();
        CHECK(text.find("\xef\xbf\xbd\xef\xbf\xbd") == std::string::npos);  // never a split é
        out += text;
      }
    CHECK(out == "\xc3\xa9 \xef\xbf\xbd");
  }
  SECTION("binary adds the exact bytes") {
    auto events = collect(json{{"command", "printf '\\377'"}, {"binary", true}});
    REQUIRE(events.size() == 2);
    CHECK(events[0].payload()["data_b64"] == "/w==");
  }
  SECTION("timeout") {
    auto events = collect(json{{"command", "echo started; sleep 30"}, {"timeout_ms", 300}});
    auto summary = events.back().payload();
    CHECK(summary["exit_code"] == 124);
    CHECK(summary["timed_out"] == true);
  }
  SECTION("a silent command gets its response head at once") {
    raw_client c(agent.socket());
    c.post_json("/process/exec", json{{"command", "sleep 0.5"}}, true);
    CHECK(c.read_head(std::chrono::milliseconds(400)) == 200);
  }
}

TEST_CASE("streamed exec: what can be refused is answered as a plain error") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  raw_client c(agent.socket());
  c.post_json("/process/exec", json{{"command", "true"}, {"cwd", "/nonexistent/sfa"}}, true);
  REQUIRE(c.read_head() == 400);
  auto body = json::parse(c.read_body());
  CHECK(body["error"]["code"] == "invalid_argument");

  raw_client bad(agent.socket());
  bad.send("POST", "/process/exec", "{oops", true);
  REQUIRE(bad.read_head() == 400);
}

TEST_CASE("streamed exec: a program that cannot start says why on stderr before its exit") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  std::string script = dir / "not-executable";
  std::ofstream(script) << "#!/bin/sh\necho never\n";
  for (auto [argv0, code, why] : {std::tuple{std::string("sfa-no-such-program"), 127, std::string("command not found")},
                                  std::tuple{script, 126, std::string("cannot execute")}}) {
    raw_client c(agent.socket());
    c.post_json("/process/exec", json{{"argv", {argv0}}}, true);
    REQUIRE(c.read_head() == 200);
    std::string err;
    std::optional<sse_event> last;
    while (auto e = c.next_event()) {
      if (e->name == "exit") {
        last = e;
        break;
      }
      REQUIRE(e->name == "stderr");
      err += e->payload()["data"].get<std::string>();
    }
    REQUIRE(last);
    CHECK(last->payload()["exit_code"] == code);
    CHECK(err.find("sandfort-agent: ") == 0);
    CHECK(err.find(argv0) != std::string::npos);
    CHECK(err.find(why) != std::string::npos);
  }
}

TEST_CASE("a client that leaves mid-stream gets the command killed and reaped") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");

  SECTION("while the command is silent") {
    raw_client c(agent.socket());
    c.post_json("/process/exec", json{{"command", "sleep 100 & echo $!; exec sleep 101"}}, true);
    REQUIRE(c.read_head() == 200);
    auto e = c.next_event();
    REQUIRE(e);
    pid_t background = static_cast<pid_t>(std::stol(e->payload()["data"].get<std::string>()));
    CHECK(alive(background));
    c.close();
    CHECK(gone(background));  // the command's whole session
  }
  SECTION("while it writes a lot") {
    raw_client c(agent.socket());
    c.post_json("/process/exec", json{{"command", "echo $$; exec yes"}}, true);
    REQUIRE(c.read_head() == 200);
    auto e = c.next_event();
    REQUIRE(e);
    pid_t yes = static_cast<pid_t>(std::stol(e->payload()["data"].get<std::string>()));
    c.close();
    CHECK(gone(yes));
  }
  // The agent itself is fine and answers.
  auto r = post(agent.socket(), "/process/exec", json{{"command", "echo ok"}});
  CHECK(r.body["stdout"] == "ok\n");
}

TEST_CASE("without Accept: text/event-stream, exec answers whole") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  raw_client c(agent.socket());
  c.post_json("/process/exec", json{{"command", "echo whole"}}, false);
  REQUIRE(c.read_head() == 200);
  CHECK(c.head().find("application/json") != std::string::npos);
  CHECK(json::parse(c.read_body())["stdout"] == "whole\n");
}
