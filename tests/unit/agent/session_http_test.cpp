// Persistent shells through the real agent binary over its unix socket.

#include <netinet/in.h>

#include <fstream>

#include "session_support.hpp"

using namespace sandfort;
using namespace sandfort::agent::test;
using nlohmann::json;

namespace {

json exec_in(const agent_binary& agent, const std::string& session, const std::string& command,
             std::optional<int> timeout_ms = std::nullopt) {
  json body = {{"command", command}};
  if (timeout_ms) body["timeout_ms"] = *timeout_ms;
  std::string target = session == "default" ? "/exec" : "/sessions/" + session + "/exec";
  auto r = post(agent.socket(), target, body);
  INFO("command: " << command << "\nanswer: " << r.body.dump());
  REQUIRE(r.status == 200);
  return r.body;
}

std::string out_of(const json& j) { return j["stdout"].get<std::string>(); }

unsigned short free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

pid_t pid_in(const std::string& text) { return static_cast<pid_t>(std::stol(text)); }

std::optional<json> session_item(const agent_binary& agent, const std::string& name) {
  auto list = call(agent.socket(), http::verb::get, "/sessions");
  for (const auto& item : list.body["items"])
    if (item["name"] == name) return item;
  return std::nullopt;
}

}  // namespace

TEST_CASE("a session keeps cwd, exported variables, functions and aliases between calls") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");

  auto first = exec_in(agent, "default", "cd " + dir.path() + " && mkdir -p w && cd w");
  CHECK(first["exit_code"] == 0);
  CHECK(first["session_restarted"] == false);
  CHECK(out_of(exec_in(agent, "default", "pwd")) == dir.path() + "/w\n");

  exec_in(agent, "default", "export T=abc; UNEXPORTED=x");
  CHECK(out_of(exec_in(agent, "default", "echo $T; sh -c 'echo ${T}-in-child'; echo $UNEXPORTED")) ==
        "abc\nabc-in-child\nx\n");

  exec_in(agent, "default", "greet() { echo \"hello $1\"; }; alias ll='echo aliased'");
  CHECK(out_of(exec_in(agent, "default", "greet you; ll")) == "hello you\naliased\n");

  SECTION("declarations stay global (commands run at the top level, not in a function)") {
    exec_in(agent, "default", "declare -a ARR=(one two); declare -A MAP=([k]=v)");
    CHECK(out_of(exec_in(agent, "default", "echo ${ARR[1]} ${MAP[k]}")) == "two v\n");
  }
  SECTION("return ends just the command") {
    auto r = exec_in(agent, "default", "echo before; return 4; echo after");
    CHECK(r["exit_code"] == 4);
    CHECK(out_of(r) == "before\n");
    CHECK(r["session_restarted"] == false);
    CHECK(out_of(exec_in(agent, "default", "echo $T")) == "abc\n");
  }
}

TEST_CASE("a session command has separate stdout and stderr, EOF on stdin, and its exit code") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");

  auto r = exec_in(agent, "default", "echo out; echo err >&2; echo more; printf 'a\\r\\n\\tb'");
  CHECK(out_of(r) == "out\nmore\na\r\n\tb");
  CHECK(r["stderr"] == "err\n");
  CHECK(r["timed_out"] == false);
  CHECK(r["truncated"] == false);
  CHECK(r["duration_ms"].is_number_integer());

  auto reads = exec_in(agent, "default", "cat; read -r line; echo \"read=$? cat-done\"");
  CHECK(out_of(reads) == "read=1 cat-done\n");

  CHECK(exec_in(agent, "default", "false")["exit_code"] == 1);
  CHECK(exec_in(agent, "default", "(exit 7)")["exit_code"] == 7);
  CHECK(exec_in(agent, "default", "sh -c 'kill -TERM $$'")["exit_code"] == 143);
  auto missing = exec_in(agent, "default", "no-such-command-sfa");
  CHECK(missing["exit_code"] == 127);
  CHECK(missing["stderr"].get<std::string>().find("no-such-command-sfa") != std::string::npos);

  SECTION("a syntax error is the command's failure, not the shell's") {
    auto bad = exec_in(agent, "default", "if then fi");
    CHECK(bad["exit_code"] != 0);
    CHECK(bad["stderr"].get<std::string>().find("syntax error") != std::string::npos);
    CHECK(bad["session_restarted"] == false);
  }
  SECTION("bad requests") {
    json no_command = json::object();
    CHECK(post(agent.socket(), "/exec", no_command).status == 400);
    json empty = {{"command", ""}};
    CHECK(post(agent.socket(), "/exec", empty).status == 400);
    json unknown = {{"command", "true"}, {"cwd", "/"}};
    auto r400 = post(agent.socket(), "/exec", unknown);
    CHECK(r400.status == 400);
    CHECK(r400.body["error"]["message"] == "unknown field 'cwd'");
    json zero = {{"command", "true"}, {"timeout_s", 0}};
    CHECK(post(agent.socket(), "/exec", zero).status == 400);
    json too_long = {{"command", "true"}, {"timeout_s", 86400 * 365}};
    CHECK(post(agent.socket(), "/exec", too_long).status == 400);
    json fractional = {{"command", "echo ok"}, {"timeout_s", 2.5}};
    CHECK(post(agent.socket(), "/exec", fractional).body["stdout"] == "ok\n");
  }
}

TEST_CASE("a background job neither holds the call nor dies when the call has returned") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");

  // Without a redirect the job keeps the command's stdout and stderr.
  auto r = exec_in(agent, "default", "sleep 100 & echo $!");
  pid_t sleeper = pid_in(out_of(r));
  CHECK(alive(sleeper));

  // It writes to its inherited stdout after the call returned: that output is drained and
  // dropped, and the writer is not killed by SIGPIPE.
  std::string done = dir / "late-done";
  auto late = exec_in(agent, "default",
                      "(sleep 0.3; echo late; echo late-err >&2; touch " + done + "; exec sleep 100) & echo $!");
  pid_t writer = pid_in(out_of(late));
  REQUIRE(eventually([&] { return std::ifstream(done).good(); }));
  CHECK(alive(writer));
  auto next = exec_in(agent, "default", "echo next");
  CHECK(out_of(next) == "next\n");
  CHECK(next["stderr"] == "");
  CHECK(alive(sleeper));
  CHECK(out_of(exec_in(agent, "default", "jobs > " + dir / "jobs" + "; wc -l < " + dir / "jobs")) == "2\n");
}

TEST_CASE("a server started in the background keeps serving later calls") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  REQUIRE(post(agent.socket(), "/sessions", json{{"name", "web"}}).status == 201);

  std::string port = std::to_string(free_port());
  auto start = exec_in(agent, "web", "cd " + dir.path() + " && echo served > index.txt && python3 -m http.server " +
                                         port + " --bind 127.0.0.1 >/dev/null 2>&1 & echo $!");
  pid_t server = pid_in(out_of(start));
  auto fetched = exec_in(agent, "web",
                         "for i in $(seq 200); do curl -sf http://127.0.0.1:" + port +
                             "/index.txt && break; sleep 0.05; done");
  CHECK(out_of(fetched) == "served\n");
  CHECK(alive(server));
  // From another session too: it is a process of the sandbox, not of the call.
  CHECK(out_of(exec_in(agent, "default", "curl -sf http://127.0.0.1:" + port + "/index.txt")) == "served\n");

  // Deleting the session ends the shell and every job it started.
  CHECK(call(agent.socket(), http::verb::delete_, "/sessions/web").status == 204);
  CHECK(gone(server));
}

TEST_CASE("exit ends the shell: its status, session_restarted, then a fresh shell") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  std::string initial = out_of(exec_in(agent, "default", "pwd"));
  auto job = exec_in(agent, "default", "cd " + dir.path() + "; export Z=1; sleep 100 & echo $!");
  pid_t sleeper = pid_in(out_of(job));

  auto r = exec_in(agent, "default", "echo bye; exit 3");
  CHECK(r["exit_code"] == 3);
  CHECK(r["session_restarted"] == true);
  CHECK(out_of(r) == "bye\n");
  CHECK(gone(sleeper));  // a fresh shell starts clean: the old one's jobs went with it

  auto fresh = exec_in(agent, "default", "pwd; echo \"Z=$Z\"");
  CHECK(out_of(fresh) == initial + "Z=\n");
  CHECK(fresh["session_restarted"] == false);  // already told

  SECTION("a shell that died between calls is reported by the next one") {
    exec_in(agent, "default", "export Y=1; (sleep 0.2; kill -9 $$) >/dev/null 2>&1 &");
    REQUIRE(eventually([&] { return !session_item(agent, "default").value()["pid"].is_number(); }));
    auto after = exec_in(agent, "default", "echo \"Y=$Y\"");
    CHECK(after["session_restarted"] == true);
    CHECK(out_of(after) == "Y=\n");
  }
}

TEST_CASE("a timeout kills the command's jobs and the shell survives with its state") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  exec_in(agent, "default", "cd " + dir.path() + "; export K=kept");
  pid_t shell = session_item(agent, "default").value()["pid"].get<int>();

  SECTION("an external command") {
    std::string pids = dir / "pids";
    auto r = exec_in(agent, "default", "sleep 101 & echo $! > " + pids + "; echo started; sleep 100; echo after", 300);
    CHECK(r["exit_code"] == 124);
    CHECK(r["timed_out"] == true);
    CHECK(r["session_restarted"] == false);
    CHECK(out_of(r) == "started\n");  // the rest of the command did not run
    CHECK(gone(pid_in(read_file(pids))));  // a job it started in the background went too
  }
  SECTION("a builtin loop") {
    auto r = exec_in(agent, "default", "while :; do :; done", 300);
    CHECK(r["exit_code"] == 124);
    CHECK(r["timed_out"] == true);
    CHECK(r["session_restarted"] == false);
  }
  SECTION("a command substitution") {
    auto r = exec_in(agent, "default", "x=$(sleep 100); echo after", 300);
    CHECK(r["exit_code"] == 124);
    CHECK(out_of(r) == "");
  }
  SECTION("a loop of external commands") {
    auto r = exec_in(agent, "default", "while true; do sleep 0.05; done", 300);
    CHECK(r["exit_code"] == 124);
  }
  auto next = exec_in(agent, "default", "pwd; echo $K");
  CHECK(out_of(next) == dir.path() + "\nkept\n");
  CHECK(next["session_restarted"] == false);
  CHECK(session_item(agent, "default").value()["pid"] == shell);
  // A leftover SIGUSR2 never cuts a later command short.
  CHECK(out_of(exec_in(agent, "default", "sleep 0.2; echo whole")) == "whole\n");
}

TEST_CASE("calls to one session run one at a time, in arrival order") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  std::string gate = dir / "gate";
  std::string order = dir / "order";
  constexpr int n = 20;
  std::vector<std::unique_ptr<raw_client>> clients;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<raw_client>(agent.socket());
    // The first blocks until the gate opens; the others queue behind it.
    std::string command = (i == 0 ? "while [ ! -e " + gate + " ]; do sleep 0.02; done; " : std::string()) + "echo " +
                          std::to_string(i) + " >> " + order;
    c->post_json("/exec", json{{"command", command}}, false);
    // Arrival order is what the agent saw: wait until it has queued this one.
    REQUIRE(eventually([&] {
      auto item = session_item(agent, "default");
      return item && (*item)["busy"] == true && (*item)["waiting"] == i;
    }));
    clients.push_back(std::move(c));
  }
  std::ofstream(gate).put('\n');
  for (auto& c : clients) {
    REQUIRE(c->read_head() == 200);
    CHECK(json::parse(c->read_body())["exit_code"] == 0);
  }
  std::string expected;
  for (int i = 0; i < n; ++i) expected += std::to_string(i) + "\n";
  CHECK(read_file(order) == expected);
  CHECK(session_item(agent, "default").value()["busy"] == false);
}

TEST_CASE("different sessions run in parallel") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  REQUIRE(post(agent.socket(), "/sessions", json{{"name", "a"}}).status == 201);
  REQUIRE(post(agent.socket(), "/sessions", json{{"name", "b"}}).status == 201);
  std::string flag = dir / "from-b";
  // A waits (bounded) for a file that only B creates: A can only succeed if B ran meanwhile.
  raw_client a(agent.socket());
  a.post_json("/sessions/a/exec",
              json{{"command", "for i in $(seq 500); do [ -e " + flag + " ] && break; sleep 0.02; done; [ -e " + flag +
                                   " ] && echo seen"},
                   {"timeout_s", 30}},
              false);
  REQUIRE(eventually([&] { return session_item(agent, "a").value()["busy"] == true; }));
  CHECK(exec_in(agent, "b", "touch " + flag + "; echo made")["stdout"] == "made\n");
  REQUIRE(a.read_head() == 200);
  auto ra = json::parse(a.read_body());
  CHECK(ra["stdout"] == "seen\n");
  CHECK(ra["exit_code"] == 0);
  CHECK(ra["session_restarted"] == false);
}

TEST_CASE("sessions are created, listed and deleted") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");

  auto listed = call(agent.socket(), http::verb::get, "/sessions");
  REQUIRE(listed.status == 200);
  REQUIRE(listed.body["items"].size() == 1);
  CHECK(listed.body["items"][0]["name"] == "default");
  CHECK(listed.body["items"][0]["pid"].is_null());  // started on first use
  CHECK(listed.body["next_cursor"].is_null());

  auto made = post(agent.socket(), "/sessions", json{{"name", "build-1.x_y"}});
  REQUIRE(made.status == 201);
  CHECK(made.body["name"] == "build-1.x_y");
  CHECK(made.body["created_at"].is_string());
  pid_t shell = made.body["pid"].get<int>();
  CHECK(alive(shell));

  CHECK(post(agent.socket(), "/sessions", json{{"name", "build-1.x_y"}}).status == 409);
  CHECK(post(agent.socket(), "/sessions", json{{"name", "default"}}).status == 409);
  CHECK(post(agent.socket(), "/sessions", json{{"name", "bad name"}}).status == 400);
  CHECK(post(agent.socket(), "/sessions", json{{"name", std::string(65, 'a')}}).status == 400);
  CHECK(post(agent.socket(), "/sessions", json::object()).status == 400);
  CHECK(post(agent.socket(), "/sessions", json{{"name", 5}}).status == 400);

  auto item = session_item(agent, "build-1.x_y");
  REQUIRE(item);
  CHECK((*item)["pid"] == shell);
  CHECK((*item)["busy"] == false);

  CHECK(exec_in(agent, "build-1.x_y", "echo in-session")["stdout"] == "in-session\n");
  auto job = exec_in(agent, "build-1.x_y", "sleep 100 & echo $!");
  pid_t sleeper = pid_in(out_of(job));

  CHECK(call(agent.socket(), http::verb::delete_, "/sessions/build-1.x_y").status == 204);
  CHECK(gone(shell));
  CHECK(gone(sleeper));
  CHECK_FALSE(session_item(agent, "build-1.x_y"));
  CHECK(call(agent.socket(), http::verb::delete_, "/sessions/build-1.x_y").status == 404);
  auto missing = post(agent.socket(), "/sessions/build-1.x_y/exec", json{{"command", "true"}});
  CHECK(missing.status == 404);
  CHECK(missing.body["error"]["code"] == "not_found");
  CHECK(post(agent.socket(), "/sessions/nope/exec", json{{"command", "true"}}).status == 404);

  SECTION("deleting default restarts it fresh on next use") {
    exec_in(agent, "default", "cd " + dir.path() + "; export D=1");
    pid_t first = session_item(agent, "default").value()["pid"].get<int>();
    CHECK(call(agent.socket(), http::verb::delete_, "/sessions/default").status == 204);
    CHECK(gone(first));
    REQUIRE(session_item(agent, "default"));  // always listed
    auto fresh = exec_in(agent, "default", "echo \"D=$D\"");
    CHECK(out_of(fresh) == "D=\n");
    CHECK(fresh["session_restarted"] == false);  // asked for, not lost
  }
  SECTION("deleting a busy session ends its running command") {
    REQUIRE(post(agent.socket(), "/sessions", json{{"name", "busy"}}).status == 201);
    raw_client c(agent.socket());
    c.post_json("/sessions/busy/exec", json{{"command", "sleep 100"}}, false);
    REQUIRE(eventually([&] { return session_item(agent, "busy").value()["busy"] == true; }));
    CHECK(call(agent.socket(), http::verb::delete_, "/sessions/busy").status == 204);
    REQUIRE(c.read_head() == 200);
    auto r = json::parse(c.read_body());
    CHECK(r["session_restarted"] == true);
    CHECK(r["exit_code"] == 137);
  }
}

TEST_CASE("session exec streams events with Accept: text/event-stream") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  REQUIRE(post(agent.socket(), "/sessions", json{{"name", "s"}}).status == 201);
  std::string go = dir / "go";

  raw_client c(agent.socket());
  c.post_json("/sessions/s/exec",
              json{{"command", "cd " + dir.path() + "; echo first; echo warn >&2; while [ ! -e " + go +
                                   " ]; do sleep 0.02; done; printf 'second\\r\\n'"}},
              true);
  REQUIRE(c.read_head() == 200);
  CHECK(c.head().find("text/event-stream") != std::string::npos);
  // The command cannot finish before we saw its first output: it waits for our file.
  std::string out, err;
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
    (e->name == "stdout" ? out : err) += e->payload()["data"].get<std::string>();
  }
  REQUIRE(last);
  CHECK(out == "first\nsecond\r\n");
  CHECK(err == "warn\n");
  auto summary = last->payload();
  CHECK(summary["exit_code"] == 0);
  CHECK(summary["session_restarted"] == false);
  CHECK(summary["timed_out"] == false);
  CHECK(summary["truncated"] == false);
  CHECK(summary["duration_ms"].is_number_integer());
  CHECK_FALSE(c.next_event());  // the stream ended

  // The state of the streamed command persists like any other.
  CHECK(exec_in(agent, "s", "pwd")["stdout"] == dir.path() + "\n");

  SECTION("an unknown session is a plain 404") {
    raw_client missing(agent.socket());
    missing.post_json("/sessions/nope/exec", json{{"command", "true"}}, true);
    CHECK(missing.read_head() == 404);
  }
  SECTION("/exec streams in the default session, and exit is reported") {
    raw_client d(agent.socket());
    d.post_json("/exec", json{{"command", "exit 9"}}, true);
    REQUIRE(d.read_head() == 200);
    auto e = d.next_event();
    REQUIRE(e);
    CHECK(e->name == "exit");
    CHECK(e->payload()["exit_code"] == 9);
    CHECK(e->payload()["session_restarted"] == true);
  }
  SECTION("a client that leaves mid-stream stops the command; the shell stays") {
    raw_client leaving(agent.socket());
    leaving.post_json("/sessions/s/exec", json{{"command", "export KEEP=1; sh -c 'echo $$; exec sleep 100'"}}, true);
    REQUIRE(leaving.read_head() == 200);
    auto e = leaving.next_event();
    REQUIRE(e);
    pid_t sleeper = pid_in(e->payload()["data"].get<std::string>());
    CHECK(alive(sleeper));
    leaving.close();
    CHECK(gone(sleeper));
    auto after = exec_in(agent, "s", "echo $KEEP");
    CHECK(after["stdout"] == "1\n");
    CHECK(after["session_restarted"] == false);
  }
}
