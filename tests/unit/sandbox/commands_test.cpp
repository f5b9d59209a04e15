// Commands through the agent connector: validation, the state rule, what reaches the agent,
// the code_run mapping, and how a dead container is told from a transient failure.

#include <catch2/catch.hpp>

#include <boost/asio/detached.hpp>

#include "fakes.hpp"
#include "sandfort/store/audit_store.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

result<exec_result> exec(fixture& f, const std::string& id, exec_request req) {
  return f.run(f.svc->commands().exec(f.org_a.id, id, std::move(req)));
}

result<exec_result> code_run(fixture& f, const std::string& id, const code_run_request& req) {
  return f.run(f.svc->commands().code_run(f.org_a.id, id, req));
}

exec_request argv_request(std::vector<std::string> argv) {
  exec_request r;
  r.argv = std::move(argv);
  return r;
}

}  // namespace

TEST_CASE("sandbox: exec forwards argv env cwd stdin and the timeout to the connector", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  exec_request req;
  req.argv = {"ls", "-la", "/tmp"};
  req.cwd = "/work";
  req.env = {{"A", "1"}, {"B", "two words"}};
  req.stdin_data = "input";
  req.timeout_s = 7;
  req.binary = true;
  f.agent.exec_answer = exec_result{2, "out", "err", std::nullopt, std::nullopt, 11, true, true};
  auto r = exec(f, v.id, req);
  REQUIRE(r);
  // The connector's answer comes back as is.
  CHECK(r->exit_code == 2);
  CHECK(r->stdout_text == "out");
  CHECK(r->stderr_text == "err");
  CHECK(r->duration_ms == 11);
  CHECK(r->timed_out);
  CHECK(r->truncated);

  REQUIRE(f.agent.execs.size() == 1);
  const auto& [id, call] = f.agent.execs[0];
  CHECK(id == v.id);
  CHECK(call.request.argv == req.argv);
  CHECK(call.request.command.empty());
  CHECK(call.request.cwd == "/work");
  CHECK(call.request.env == req.env);
  CHECK(call.request.stdin_data == std::optional<std::string>("input"));
  CHECK(call.request.binary);
  CHECK(call.timeout == std::chrono::seconds(7));
  CHECK(call.max_output_bytes == 12345u);  // cfg.output_cap_bytes
}

TEST_CASE("sandbox: exec uses the configured default timeout and accepts a command line", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  exec_request req;
  req.command = "echo $HOME | wc -c";
  REQUIRE(exec(f, v.id, req));
  REQUIRE(f.agent.execs.size() == 1);
  CHECK(f.agent.execs[0].second.request.command == "echo $HOME | wc -c");
  CHECK(f.agent.execs[0].second.request.argv.empty());
  CHECK(f.agent.execs[0].second.timeout == std::chrono::seconds(42));  // cfg.exec_default_timeout_s
}

TEST_CASE("sandbox: exec needs exactly one of command and argv", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  exec_request neither;
  auto r1 = exec(f, v.id, neither);
  REQUIRE_FALSE(r1.ok());
  CHECK(r1.err().code == errc::invalid_argument);
  CHECK(r1.err().message.find("command") != std::string::npos);

  exec_request both;
  both.command = "true";
  both.argv = {"true"};
  auto r2 = exec(f, v.id, both);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.err().code == errc::invalid_argument);
  CHECK(f.agent.execs.empty());
}

TEST_CASE("sandbox: exec bounds the timeout by the configured maximum", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  for (std::int64_t bad : {std::int64_t{101}, std::int64_t{0}, std::int64_t{-5}}) {
    INFO("timeout_s " << bad);
    auto req = argv_request({"true"});
    req.timeout_s = bad;
    auto r = exec(f, v.id, req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == errc::invalid_argument);
    CHECK(r.err().message.find("timeout_s") != std::string::npos);
    CHECK(r.err().message.find("100") != std::string::npos);
  }
  CHECK(f.agent.execs.empty());
  auto req = argv_request({"true"});
  req.timeout_s = 100;  // exactly the maximum
  REQUIRE(exec(f, v.id, req));
  CHECK(f.agent.execs.back().second.timeout == std::chrono::seconds(100));
}

TEST_CASE("sandbox: exec rejects environment names the agent cannot set", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  for (std::string key : {std::string(""), std::string("A=B"), std::string("A\0B", 3)}) {
    auto req = argv_request({"env"});
    req.env = {{key, "v"}};
    auto r = exec(f, v.id, req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == errc::invalid_argument);
    CHECK(r.err().message.find("env") != std::string::npos);
  }
  CHECK(f.agent.execs.empty());
}

TEST_CASE("sandbox: exec requires a started sandbox", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  REQUIRE(f.run(f.svc->stop(f.org_a.id, v.id)));
  auto r = exec(f, v.id, argv_request({"true"}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::conflict);
  CHECK(r.err().message.find("stopped") != std::string::npos);

  code_run_request cr;
  cr.language = "python";
  cr.code = "print(1)";
  CHECK(code_run(f, v.id, cr).err().code == errc::conflict);
  CHECK(f.agent.execs.empty());

  CHECK(exec(f, "sbx-0000000000000000", argv_request({"true"})).err().code == errc::not_found);
}

TEST_CASE("sandbox: code_run maps each language to its argv exactly", "[sandbox][code_run]") {
  fixture f;
  auto v = f.create_started();
  struct expectation {
    std::string language;
    std::vector<std::string> argv;
  };
  const std::string code = "print('hi')";
  const std::vector<expectation> cases = {
      {"python", {"python3", "-c", code, "a1", "a 2"}},
      {"node", {"node", "-e", code, "a1", "a 2"}},
      {"bash", {"bash", "-c", code, "bash", "a1", "a 2"}},
      {"sh", {"sh", "-c", code, "sh", "a1", "a 2"}},
  };
  for (const auto& c : cases) {
    INFO("language " << c.language);
    code_run_request req;
    req.language = c.language;
    req.code = code;
    req.argv = {"a1", "a 2"};
    req.env = {{"LANG_TEST", c.language}};
    req.timeout_s = 9;
    f.agent.execs.clear();
    auto r = code_run(f, v.id, req);
    REQUIRE(r);
    REQUIRE(f.agent.execs.size() == 1);
    const auto& call = f.agent.execs[0].second;
    CHECK(call.request.argv == c.argv);
    CHECK(call.request.command.empty());
    CHECK(call.request.env == req.env);
    CHECK(call.timeout == std::chrono::seconds(9));
  }

  // Without arguments nothing is appended.
  code_run_request bare;
  bare.language = "sh";
  bare.code = "exit 0";
  f.agent.execs.clear();
  REQUIRE(code_run(f, v.id, bare));
  CHECK(f.agent.execs.at(0).second.request.argv == std::vector<std::string>{"sh", "-c", "exit 0", "sh"});
  CHECK(f.agent.execs.at(0).second.timeout == std::chrono::seconds(42));
}

TEST_CASE("sandbox: code_run rejects other languages", "[sandbox][code_run]") {
  fixture f;
  auto v = f.create_started();
  for (std::string language : {"ruby", "Python", "python3", "", "zsh"}) {
    INFO("language '" << language << "'");
    code_run_request req;
    req.language = language;
    req.code = "1";
    auto r = code_run(f, v.id, req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == errc::invalid_argument);
    CHECK(r.err().message.find("language") != std::string::npos);
  }
  CHECK(f.agent.execs.empty());
}

TEST_CASE("sandbox: exec marks the sandbox stopped when the agent is gone with its container", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  f.agent.exec_answer = make_error(errc::unavailable, "cannot connect to the agent (fake)");
  auto* c = f.engine.of_sandbox(v.id);
  REQUIRE(c);
  c->running = false;
  c->status = "exited";
  c->exit_code = 137;
  c->oom_killed = true;

  auto r = exec(f, v.id, argv_request({"true"}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::conflict);
  CHECK(r.err().message.find("stopped") != std::string::npos);
  CHECK(r.err().message.find("137") != std::string::npos);

  auto now = f.get(f.org_a.id, v.id);
  REQUIRE(now);
  CHECK(now->state == "stopped");
  CHECK(now->error_message.find("exited with code 137") != std::string::npos);
  CHECK(now->error_message.find("out of memory") != std::string::npos);

  // Now it is simply stopped.
  CHECK(exec(f, v.id, argv_request({"true"})).err().code == errc::conflict);
  CHECK(f.agent.execs.size() == 1);
}

TEST_CASE("sandbox: exec keeps a running sandbox started when the agent is briefly unreachable", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  f.agent.exec_answer = make_error(errc::unavailable, "cannot connect to the agent (fake)");
  auto r = exec(f, v.id, argv_request({"true"}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::unavailable);
  CHECK(f.get(f.org_a.id, v.id)->state == "started");

  // Other agent errors pass through untouched.
  f.agent.exec_answer = make_error(errc::invalid_argument, "cwd does not exist");
  auto r2 = exec(f, v.id, argv_request({"true"}));
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.err().code == errc::invalid_argument);
  CHECK(r2.err().message == "cwd does not exist");
  CHECK(f.get(f.org_a.id, v.id)->state == "started");
}

TEST_CASE("sandbox: exec_stream validates then streams the connector's bytes to the sink", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  collecting_sink sink;
  exec_request req;
  req.argv = {"seq", "3"};
  req.timeout_s = 5;
  auto r = f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, req, sink));
  REQUIRE(r.ok());
  CHECK(sink.bytes == "event: stdout\ndata: {\"data\":\"hi\"}\n\nevent: exit\ndata: {\"exit_code\":0}\n\n");
  REQUIRE(f.agent.execs.size() == 1);
  CHECK(f.agent.execs[0].first == v.id);
  CHECK(f.agent.execs[0].second.request.argv == req.argv);
  CHECK(f.agent.execs[0].second.timeout == std::chrono::seconds(5));
  CHECK(f.agent.execs[0].second.max_output_bytes == 12345u);

  // The same rules as exec, before anything is written.
  collecting_sink untouched;
  exec_request neither;
  CHECK(f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, neither, untouched)).err().code == errc::invalid_argument);
  exec_request too_long = req;
  too_long.timeout_s = 101;
  CHECK(f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, too_long, untouched)).err().code == errc::invalid_argument);
  CHECK(f.run(f.svc->commands().exec_stream(f.org_b.id, v.id, req, untouched)).err().code == errc::not_found);
  REQUIRE(f.run(f.svc->stop(f.org_a.id, v.id)));
  CHECK(f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, req, untouched)).err().code == errc::conflict);
  CHECK(untouched.writes == 0);
  CHECK(f.agent.execs.size() == 1);
}

TEST_CASE("sandbox: exec_stream holds a lying agent to the output cap", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  // 12345 bytes per stream (the fixture's output_cap_bytes); the agent sends 3 x 5000 on stdout,
  // an event it never sends, a second exit and output after it.
  const std::string chunk(5000, 'x');
  const std::string out = "event: stdout\ndata: {\"data\":\"" + chunk + "\"}\n\n";
  f.agent.stream_chunks = {out, out, "event: bogus\ndata: {}\n\n", out,
                           "event: stderr\ndata: {\"data\":\"e\"}\n\n",
                           "event: exit\ndata: {\"exit_code\":0}\n\n",
                           "event: exit\ndata: {\"exit_code\":1}\n\n", out};
  collecting_sink sink;
  exec_request req;
  req.argv = {"yes"};
  REQUIRE(f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, req, sink)).ok());
  std::size_t stdout_bytes = 0;
  for (auto at = sink.bytes.find("\"data\":\""); at != std::string::npos; at = sink.bytes.find("\"data\":\"", at + 1)) {
    if (sink.bytes.compare(at + 8, 1, "x") == 0) stdout_bytes += sink.bytes.find('"', at + 8) - (at + 8);
  }
  CHECK(stdout_bytes == 12345u);
  CHECK(sink.bytes.find("bogus") == std::string::npos);
  CHECK(sink.bytes.find("\"e\"") != std::string::npos);  // stderr has its own cap
  CHECK(sink.bytes.ends_with("event: exit\ndata: {\"exit_code\":0,\"truncated\":true}\n\n"));
  CHECK(sink.bytes.find("exit_code\":1") == std::string::npos);
}

// Found by reading the relay for tests/fuzz/fuzz_sse_relay: the final event used to be passed on
// as the agent sent it, and SSE names an event by its last `event:` line.
TEST_CASE("sandbox: exec_stream rebuilds the final event instead of passing on the agent's bytes", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  exec_request req;
  req.argv = {"true"};
  SECTION("an exit event that names another event is sent as exit") {
    f.agent.stream_chunks = {"event: exit\nevent: stdout\ndata: {\"exit_code\":0}\nid: 7\n\n"};
    collecting_sink sink;
    REQUIRE(f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, req, sink)).ok());
    CHECK(sink.bytes == "event: exit\ndata: {\"exit_code\":0}\n\n");
  }
  SECTION("an exit or error event without a JSON object becomes an error event") {
    const char* bad = GENERATE("event: exit\ndata: 0\n\n", "event: error\ndata: <html>\n\n", "event: exit\n\n");
    f.agent.stream_chunks = {bad, "event: stdout\ndata: {\"data\":\"late\"}\n\n"};
    collecting_sink sink;
    REQUIRE(f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, req, sink)).ok());
    CHECK(sink.bytes.starts_with("event: error\ndata: {\"error\":{\"code\":\"internal\",\"message\":\"the agent sent a malformed "));
    CHECK(sink.bytes.find("late") == std::string::npos);
  }
}

// Seen on a loaded CI machine: an event stream that the agent's side cut short ended like a whole
// one, and the client could only say "the stream ended without an exit event".
TEST_CASE("sandbox: exec_stream ends with an error event when the agent stops answering mid-stream",
          "[sandbox][exec]") {
  exec_request req;
  req.command = "echo first; sleep 3; echo second";
  const auto broke = make_error(errc::unavailable, "the sandbox's agent stopped answering during the command: end of stream");
  SECTION("after output: the error is the last event, and the call succeeded (the events began)") {
    fixture f;
    auto v = f.create_started();
    f.agent.stream_chunks = {"event: stdout\ndata: {\"data\":\"first\\n\"}\n\n"};
    f.agent.stream_end = broke;
    collecting_sink sink;
    REQUIRE(f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, req, sink)).ok());
    CHECK(sink.bytes ==
          "event: stdout\ndata: {\"data\":\"first\\n\"}\n\n"
          "event: error\ndata: {\"error\":{\"code\":\"unavailable\",\"message\":\"the sandbox's agent stopped "
          "answering during the command: end of stream\"}}\n\n");
  }
  SECTION("after the exit event: nothing is added, the error goes back to the caller") {
    fixture f;
    auto v = f.create_started();
    f.agent.stream_end = broke;
    collecting_sink sink;
    auto r = f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, req, sink));
    REQUIRE_FALSE(r.ok());
    CHECK(sink.bytes.ends_with("event: exit\ndata: {\"exit_code\":0}\n\n"));
  }
  SECTION("before any event: the error is the answer, nothing is written") {
    fixture f;
    auto v = f.create_started();
    f.agent.stream_chunks = {};
    f.agent.stream_end = broke;
    collecting_sink sink;
    auto r = f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, req, sink));
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == errc::unavailable);
    CHECK(sink.writes == 0);
  }
}

TEST_CASE("sandbox: code_run_stream maps the language like code_run", "[sandbox][code_run]") {
  fixture f;
  auto v = f.create_started();
  collecting_sink sink;
  code_run_request req;
  req.language = "node";
  req.code = "console.log(1)";
  req.argv = {"x"};
  REQUIRE(f.run(f.svc->commands().code_run_stream(f.org_a.id, v.id, req, sink)).ok());
  REQUIRE(f.agent.execs.size() == 1);
  CHECK(f.agent.execs[0].second.request.argv == std::vector<std::string>{"node", "-e", "console.log(1)", "x"});
  CHECK(sink.writes == 2);

  req.language = "perl";
  CHECK(f.run(f.svc->commands().code_run_stream(f.org_a.id, v.id, req, sink)).err().code == errc::invalid_argument);
  CHECK(f.agent.execs.size() == 1);
}

TEST_CASE("sandbox: exec_stream marks the sandbox stopped when its container died", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  f.agent.stream_answer = make_error(errc::unavailable, "cannot connect to the sandbox agent (fake)");
  auto* c = f.engine.of_sandbox(v.id);
  REQUIRE(c);
  c->running = false;
  c->exit_code = 2;
  collecting_sink sink;
  exec_request req;
  req.command = "true";
  auto r = f.run(f.svc->commands().exec_stream(f.org_a.id, v.id, req, sink));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::conflict);
  CHECK(sink.writes == 0);
  auto now = f.get(f.org_a.id, v.id);
  REQUIRE(now);
  CHECK(now->state == "stopped");
  CHECK(now->error_message.find("exited with code 2") != std::string::npos);

  // A running container: the transient error comes back as is.
  fixture g;
  auto w = g.create_started();
  g.agent.stream_answer = make_error(errc::unavailable, "cannot connect to the sandbox agent (fake)");
  auto r2 = g.run(g.svc->commands().exec_stream(g.org_a.id, w.id, req, sink));
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.err().code == errc::unavailable);
  CHECK(g.get(g.org_a.id, w.id)->state == "started");
}

TEST_CASE("sandbox: the agent is reached only for a started sandbox of the caller", "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  // The fake connector has no sockets: getting as far as asking it proves the checks passed.
  auto ours = f.run(f.svc->commands().connect_agent(f.org_a.id, v.id));
  REQUIRE_FALSE(ours.ok());
  CHECK(ours.err().message.find("fake") != std::string::npos);
  CHECK(f.run(f.svc->commands().connect_agent(f.org_b.id, v.id)).err().code == errc::not_found);
  f.agent.forgotten.clear();
  REQUIRE(f.run(f.svc->stop(f.org_a.id, v.id)));
  CHECK(f.run(f.svc->commands().connect_agent(f.org_a.id, v.id)).err().code == errc::conflict);
  CHECK(f.agent.forgotten == std::vector<std::string>{v.id});
}

TEST_CASE("sandbox: a run of commands reads the sandbox's row once, and again after any change to a sandbox",
          "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  auto other = f.create_started();
  auto statements = [&] { return f.db->stats().prepared + f.db->stats().reused; };
  REQUIRE(exec(f, v.id, argv_request({"true"})));
  const auto kept = statements();
  REQUIRE(exec(f, v.id, argv_request({"true"})));
  REQUIRE(exec(f, v.id, argv_request({"true"})));
  CHECK(statements() == kept);  // the events go through the group writer's own connection
  CHECK(f.agent.execs.size() == 3);

  // A change to another sandbox drops what was kept: the next command reads its row again.
  REQUIRE(f.run(f.svc->stop(f.org_a.id, other.id)));
  const auto after_other = statements();
  REQUIRE(exec(f, v.id, argv_request({"true"})));
  CHECK(statements() > after_other);

  // Its own stop is seen by the very next command, and another organization never sees it.
  CHECK(exec(f, v.id, argv_request({"true"})).ok());
  CHECK(f.run(f.svc->commands().exec(f.org_b.id, v.id, argv_request({"true"}))).err().code == errc::not_found);
  REQUIRE(f.run(f.svc->stop(f.org_a.id, v.id)));
  auto r = exec(f, v.id, argv_request({"true"}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::conflict);
  CHECK(f.agent.execs.size() == 5);
}

TEST_CASE("sandbox: a command alone has its event committed on the I/O thread, commands at once through the writer",
          "[sandbox][exec]") {
  fixture f;
  auto v = f.create_started();
  const auto lone_commits = [&] { return f.events->committed().lone_commits; };
  const auto first = lone_commits();
  REQUIRE(exec(f, v.id, argv_request({"true"})));
  REQUIRE(exec(f, v.id, argv_request({"true"})));
  CHECK(lone_commits() == first + 2);

  // The first command waits at the agent while the second one's event is recorded.
  f.agent.exec_gate = std::make_shared<asio::steady_timer>(f.ioc, asio::steady_timer::time_point::max());
  std::vector<result<exec_result>> done;
  auto one = [&]() -> asio::awaitable<void> {
    exec_request req = argv_request({"true"});  // named: GCC 12 and temporaries in coroutines
    auto r = co_await f.svc->commands().exec(f.org_a.id, v.id, std::move(req));
    done.push_back(std::move(r));
  };
  const auto agent_calls = f.agent.execs.size();
  f.ioc.restart();
  asio::co_spawn(f.ioc, one(), asio::detached);
  while (f.agent.execs.size() < agent_calls + 1) REQUIRE(f.ioc.run_one_for(std::chrono::seconds(5)) == 1);
  CHECK(lone_commits() == first + 3);
  asio::co_spawn(f.ioc, one(), asio::detached);
  while (f.agent.execs.size() < agent_calls + 2) REQUIRE(f.ioc.run_one_for(std::chrono::seconds(5)) == 1);
  CHECK(lone_commits() == first + 3);  // the second one's went through the writer's thread
  f.agent.exec_gate->cancel();
  f.ioc.run_for(std::chrono::seconds(5));
  REQUIRE(done.size() == 2);
  CHECK(done[0].ok());
  CHECK(done[1].ok());
  // Both paths append to one chain.
  store::audit_filter all;
  all.limit = 100;
  auto events = store::audit_store(*f.db).list_audit_events(f.org_a.id, all);
  REQUIRE(events);
  for (std::size_t i = 1; i < events->size(); ++i) CHECK((*events)[i].prev_hash == (*events)[i - 1].hash);
}
