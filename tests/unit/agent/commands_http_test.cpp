// Background commands through the real agent binary.

#include <fstream>

#include "sandfort/core/ids.hpp"
#include "session_support.hpp"

using namespace sandfort;
using namespace sandfort::agent::test;
using nlohmann::json;

namespace {

json start(const agent_binary& agent, const json& body) {
  auto r = post(agent.socket(), "/commands", body);
  INFO(r.body.dump());
  REQUIRE(r.status == 201);
  return r.body;
}

json status_of(const agent_binary& agent, const std::string& id) {
  auto r = call(agent.socket(), http::verb::get, "/commands/" + id);
  REQUIRE(r.status == 200);
  return r.body;
}

bool exited(const agent_binary& agent, const std::string& id) { return status_of(agent, id)["state"] == "exited"; }

int send_stdin(const agent_binary& agent, const std::string& id, const std::string& bytes, bool eof) {
  http::request req = http::make_request(http::verb::post, "/commands/" + id + "/stdin" + (eof ? "?eof=true" : ""));
  req.set(http::bhttp::field::content_type, "application/octet-stream");
  req.body() = bytes;
  auto res = run_coroutine(http::unix_request(agent.socket(), std::move(req), {}));
  REQUIRE(res.ok());
  return res->result_int();
}

int kill_with(const agent_binary& agent, const std::string& id, const json& signal) {
  json body = json::object();
  if (!signal.is_null()) body["signal"] = signal;
  return post(agent.socket(), "/commands/" + id + "/kill", body).status;
}

}  // namespace

TEST_CASE("a background command runs, takes stdin, and keeps its output") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");

  auto c = start(agent, json{{"command", "echo hello; read -r line; echo \"got:$line\"; echo bye >&2; pwd; echo $CMD_X"},
                             {"cwd", dir.path()},
                             {"env", {{"CMD_X", "from-env"}}}});
  std::string id = c["id"];
  CHECK(is_id(id, "cmd-"));
  CHECK(c["state"] == "running");
  CHECK(c["pid"].is_number_integer());
  CHECK(c["command"].get<std::string>().rfind("echo hello", 0) == 0);
  CHECK(c["started_at"].is_string());
  CHECK_FALSE(c.contains("exit_code"));

  // It waits for stdin: still running.
  REQUIRE(eventually([&] { return call(agent.socket(), http::verb::get, "/commands/" + id + "/logs").body["stdout"] == "hello\n"; }));
  CHECK(status_of(agent, id)["state"] == "running");
  CHECK(send_stdin(agent, id, "abc\n", false) == 204);
  REQUIRE(eventually([&] { return exited(agent, id); }));

  auto done = status_of(agent, id);
  CHECK(done["exit_code"] == 0);
  CHECK(done["ended_at"].is_string());
  auto logs = call(agent.socket(), http::verb::get, "/commands/" + id + "/logs");
  REQUIRE(logs.status == 200);
  CHECK(logs.body["stdout"] == "hello\ngot:abc\n" + dir.path() + "\nfrom-env\n");
  CHECK(logs.body["stderr"] == "bye\n");
  CHECK(logs.body["dropped_bytes"] == 0);

  auto list = call(agent.socket(), http::verb::get, "/commands");
  REQUIRE(list.body["items"].size() == 1);
  CHECK(list.body["items"][0]["id"] == id);
  CHECK(list.body["next_cursor"].is_null());

  // Its stdin closed when it exited; a signal to it is a conflict now.
  CHECK(send_stdin(agent, id, "more", false) == 409);
  CHECK(kill_with(agent, id, "TERM") == 409);
}

TEST_CASE("background commands: stdin EOF, signals to the process group, unknown ids, bad requests") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");

  SECTION("eof closes stdin after the bytes") {
    std::string id = start(agent, json{{"command", "cat; echo end"}})["id"];
    CHECK(send_stdin(agent, id, "part1 ", false) == 204);
    CHECK(send_stdin(agent, id, "part2", true) == 204);
    REQUIRE(eventually([&] { return exited(agent, id); }));
    CHECK(call(agent.socket(), http::verb::get, "/commands/" + id + "/logs").body["stdout"] == "part1 part2end\n");
    CHECK(send_stdin(agent, id, "x", false) == 409);
  }
  SECTION("TERM by default, to the whole group") {
    auto c = start(agent, json{{"command", "sleep 100 & echo $! > " + dir / "bg" + "; sleep 101"}});
    std::string id = c["id"];
    REQUIRE(eventually([&] { return read_file(dir / "bg").size() > 1; }));
    pid_t background = static_cast<pid_t>(std::stol(read_file(dir / "bg")));
    CHECK(kill_with(agent, id, nullptr) == 204);
    REQUIRE(eventually([&] { return exited(agent, id); }));
    CHECK(status_of(agent, id)["exit_code"] == 143);
    CHECK(gone(background));
  }
  SECTION("by name or number") {
    std::string a = start(agent, json{{"command", "exec sleep 100"}})["id"];
    std::string b = start(agent, json{{"command", "exec sleep 100"}})["id"];
    std::string d = start(agent, json{{"command", "exec sleep 100"}})["id"];
    CHECK(kill_with(agent, a, "KILL") == 204);
    CHECK(kill_with(agent, b, 2) == 204);
    CHECK(kill_with(agent, d, "sigusr1") == 204);
    REQUIRE(eventually([&] { return exited(agent, a) && exited(agent, b) && exited(agent, d); }));
    CHECK(status_of(agent, a)["exit_code"] == 137);
    CHECK(status_of(agent, b)["exit_code"] == 130);
    CHECK(status_of(agent, d)["exit_code"] == 138);
  }
  SECTION("bad signals and bodies") {
    std::string id = start(agent, json{{"command", "exec sleep 100"}})["id"];
    CHECK(kill_with(agent, id, "NOPE") == 400);
    CHECK(kill_with(agent, id, 0) == 400);
    CHECK(kill_with(agent, id, 65) == 400);
    CHECK(kill_with(agent, id, true) == 400);
    CHECK(post(agent.socket(), "/commands", json::object()).status == 400);
    CHECK(post(agent.socket(), "/commands", json{{"command", ""}}).status == 400);
    CHECK(post(agent.socket(), "/commands", json{{"command", "true"}, {"cwd", "/nonexistent/sfa"}}).status == 400);
    CHECK(post(agent.socket(), "/commands", json{{"command", "true"}, {"env", {{"A", 1}}}}).status == 400);
    CHECK(post(agent.socket(), "/commands", json{{"command", "true"}, {"timeout_s", 1}}).status == 400);
    CHECK(kill_with(agent, id, "KILL") == 204);
  }
  SECTION("unknown ids are 404") {
    std::string nope = "cmd-0123456789abcdef";
    CHECK(call(agent.socket(), http::verb::get, "/commands/" + nope).status == 404);
    CHECK(call(agent.socket(), http::verb::get, "/commands/" + nope + "/logs").status == 404);
    CHECK(kill_with(agent, nope, "TERM") == 404);
    CHECK(send_stdin(agent, nope, "x", false) == 404);
    raw_client follow(agent.socket());
    follow.send("GET", "/commands/" + nope + "/logs?follow=true", "", true);
    CHECK(follow.read_head() == 404);
  }
}

TEST_CASE("logs?follow=true streams what is buffered, then new output, then exit") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  std::string go = dir / "go";
  std::string id =
      start(agent, json{{"command", "echo one; echo err-one >&2; while [ ! -e " + go +
                                        " ]; do sleep 0.02; done; echo two; exit 5"}})["id"];
  REQUIRE(eventually([&] { return call(agent.socket(), http::verb::get, "/commands/" + id + "/logs").body["stdout"] == "one\n"; }));

  raw_client c(agent.socket());
  c.send("GET", "/commands/" + id + "/logs?follow=true", "", false);
  REQUIRE(c.read_head() == 200);
  CHECK(c.head().find("text/event-stream") != std::string::npos);
  std::string out, err;
  while (out != "one\n" || err != "err-one\n") {
    auto e = c.next_event();
    REQUIRE(e);
    REQUIRE(e->name != "exit");
    (e->name == "stdout" ? out : err) += e->payload()["data"].get<std::string>();
  }
  std::ofstream(go).put('\n');  // only now can it go on
  std::optional<sse_event> last;
  while (auto e = c.next_event()) {
    if (e->name == "exit") {
      last = e;
      break;
    }
    (e->name == "stdout" ? out : err) += e->payload()["data"].get<std::string>();
  }
  REQUIRE(last);
  CHECK(out == "one\ntwo\n");
  CHECK(last->payload() == json{{"exit_code", 5}});
  CHECK_FALSE(c.next_event());

  SECTION("an exited command: the whole log, then exit at once") {
    raw_client again(agent.socket());
    again.send("GET", "/commands/" + id + "/logs?follow=1", "", false);
    REQUIRE(again.read_head() == 200);
    std::string all;
    std::optional<sse_event> end;
    while (auto e = again.next_event(std::chrono::seconds(5))) {
      if (e->name == "exit") {
        end = e;
        break;
      }
      if (e->name == "stdout") all += e->payload()["data"].get<std::string>();
    }
    REQUIRE(end);
    CHECK(all == "one\ntwo\n");
    CHECK(end->payload()["exit_code"] == 5);
  }
  SECTION("follow=false answers whole") {
    auto whole = call(agent.socket(), http::verb::get, "/commands/" + id + "/logs?follow=false");
    CHECK(whole.body["stdout"] == "one\ntwo\n");
  }
}

TEST_CASE("a follower that leaves does not disturb the command") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  std::string id = start(agent, json{{"command", "while :; do echo tick; sleep 0.01; done"}})["id"];
  {
    raw_client c(agent.socket());
    c.send("GET", "/commands/" + id + "/logs?follow=true", "", false);
    REQUIRE(c.read_head() == 200);
    REQUIRE(c.next_event());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(status_of(agent, id)["state"] == "running");
  CHECK(kill_with(agent, id, "KILL") == 204);
}
