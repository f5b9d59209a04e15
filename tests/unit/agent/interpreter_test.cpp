// Code contexts (src/agent/interpreter/) through the real agent binary: state that persists,
// output streamed before results, errors as events, interrupts, the output cap, the contexts.

#include "session_support.hpp"

using namespace sandfort;
using namespace sandfort::agent::test;
using nlohmann::json;

namespace {

struct run_events {
  std::vector<sse_event> all;
  std::string stdout_text, stderr_text;
  std::vector<json> results;
  std::optional<json> error, end;
};

run_events run(const agent_binary& agent, json body) {
  raw_client c(agent.socket());
  c.post_json("/code/run", body, false);
  int status = c.read_head();
  INFO("run: " << body.dump() << "\nhead: " << c.head());
  REQUIRE(status == 200);
  run_events r;
  while (auto e = c.next_event(std::chrono::seconds(60))) {
    r.all.push_back(*e);
    auto data = e->payload();
    if (e->name == "stdout") r.stdout_text += data["text"].get<std::string>();
    if (e->name == "stderr") r.stderr_text += data["text"].get<std::string>();
    if (e->name == "result") r.results.push_back(data);
    if (e->name == "error") r.error = data;
    if (e->name == "end") r.end = data;
  }
  REQUIRE(r.end);
  return r;
}

std::string main_text(const run_events& r) {
  for (const auto& result : r.results)
    if (result["is_main_result"] == true) return result["text"].get<std::string>();
  return "";
}

}  // namespace

TEST_CASE("a python context keeps its state, and the last expression is the main result") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  auto first = run(agent, {{"code", "x = 1"}});
  CHECK(first.results.empty());
  CHECK_FALSE(first.error);
  CHECK((*first.end)["execution_count"] == 1);
  auto second = run(agent, {{"code", "print('before')\nx + 1"}});
  CHECK(main_text(second) == "2");
  CHECK(second.stdout_text == "before\n");
  CHECK((*second.end)["execution_count"] == 2);
  CHECK((*second.end)["context_id"] == (*first.end)["context_id"]);
  // Output printed before a result arrives before it.
  REQUIRE(second.all.size() >= 3);
  CHECK(second.all[0].name == "stdout");
  CHECK(second.all[second.all.size() - 2].name == "result");
  CHECK(second.all.back().name == "end");

  SECTION("display() of several objects gives several results, none of them the main one") {
    auto shown = run(agent, {{"code", "display(1, 'a')"}});
    REQUIRE(shown.results.size() == 2);
    CHECK(shown.results[0]["text"] == "1");
    CHECK(shown.results[1]["text"] == "'a'");
    CHECK(shown.results[1]["is_main_result"] == false);
  }
  SECTION("an object's _repr_html_ is its html") {
    auto rich = run(agent, {{"code", "class T:\n  def _repr_html_(self): return '<b>t</b>'\nT()"}});
    REQUIRE(rich.results.size() == 1);
    CHECK(rich.results[0]["html"] == "<b>t</b>");
  }
  SECTION("an exception is an error event with name, value and traceback; the context lives on") {
    auto failed = run(agent, {{"code", "def f():\n  raise ValueError('bad')\nf()"}});
    REQUIRE(failed.error);
    CHECK((*failed.error)["name"] == "ValueError");
    CHECK((*failed.error)["value"] == "bad");
    auto traceback = (*failed.error)["traceback"].get<std::string>();
    CHECK(traceback.find("<cell 3>") != std::string::npos);
    CHECK(traceback.find("raise ValueError") != std::string::npos);
    CHECK(traceback.find("kernel.py") == std::string::npos);
    CHECK(main_text(run(agent, {{"code", "x"}})) == "1");
  }
  SECTION("env applies to one run") {
    CHECK(main_text(run(agent, {{"code", "import os; os.environ.get('FOO')"}, {"env", {{"FOO", "bar"}}}})) == "'bar'");
    CHECK(main_text(run(agent, {{"code", "os.environ.get('FOO', 'unset')"}})) == "'unset'");
  }
}

TEST_CASE("a run past its timeout is interrupted, one that will not stop is killed and the context restarts") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  run(agent, {{"code", "kept = 5"}});
  auto slow = run(agent, {{"code", "import time\nwhile True: time.sleep(0.05)"}, {"timeout_s", 0.5}});
  REQUIRE(slow.error);
  CHECK((*slow.error)["name"] == "TimeoutError");
  CHECK((*slow.error)["traceback"].get<std::string>().find("KeyboardInterrupt") != std::string::npos);
  CHECK((*slow.end)["timed_out"] == true);
  CHECK((*slow.end)["restarted"] == false);
  CHECK(main_text(run(agent, {{"code", "kept"}})) == "5");

  auto stubborn = run(agent, {{"code", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"},
                              {"timeout_s", 0.5}});
  REQUIRE(stubborn.error);
  CHECK((*stubborn.error)["name"] == "TimeoutError");
  CHECK((*stubborn.end)["restarted"] == true);
  auto after = run(agent, {{"code", "'kept' in globals()"}});
  CHECK(main_text(after) == "False");
  CHECK((*after.end)["execution_count"] == 1);
}

TEST_CASE("an endless print is cut at the output cap and the run interrupted") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock", {"--output-cap", "100000"});
  auto flood = run(agent, {{"code", "while True: print('x' * 1000)"}});
  CHECK(flood.stdout_text.size() <= 100000);
  CHECK(flood.stdout_text.size() > 50000);
  REQUIRE(flood.error);
  CHECK((*flood.error)["name"] == "OutputLimitExceeded");
  CHECK((*flood.end)["truncated"] == true);
  CHECK(main_text(run(agent, {{"code", "1 + 1"}})) == "2");
}

TEST_CASE("contexts: create with a language and cwd, list, restart, delete") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  auto made = post(agent.socket(), "/code/contexts", {{"language", "js"}, {"cwd", dir.path()}});
  REQUIRE(made.status == 201);
  std::string id = made.body["id"];
  CHECK(made.body["language"] == "js");
  CHECK(made.body["cwd"] == dir.path());
  CHECK(made.body["busy"] == false);

  run(agent, {{"code", "var a = 20"}, {"context_id", id}});
  auto js = run(agent, {{"code", "console.log(process.cwd()); a + 1"}, {"context_id", id}});
  CHECK(main_text(js) == "21");
  CHECK(js.stdout_text == dir.path() + "\n");
  auto thrown = run(agent, {{"code", "throw new TypeError('nope')"}, {"context_id", id}});
  REQUIRE(thrown.error);
  CHECK((*thrown.error)["name"] == "TypeError");

  auto list = call(agent.socket(), http::verb::get, "/code/contexts");
  REQUIRE(list.body["items"].size() == 1);
  CHECK(list.body["items"][0]["execution_count"] == 3);

  auto mismatch = raw_client(agent.socket());
  mismatch.post_json("/code/run", {{"code", "1"}, {"context_id", id}, {"language", "python"}}, false);
  CHECK(mismatch.read_head() == 400);

  auto restarted = post(agent.socket(), "/code/contexts/" + id + "/restart", json::object());
  REQUIRE(restarted.status == 200);
  CHECK(restarted.body["execution_count"] == 0);
  auto gone = run(agent, {{"code", "typeof a"}, {"context_id", id}});
  CHECK(main_text(gone) == "'undefined'");

  CHECK(call(agent.socket(), http::verb::delete_, "/code/contexts/" + id).status == 204);
  CHECK(call(agent.socket(), http::verb::delete_, "/code/contexts/" + id).status == 404);
  raw_client missing(agent.socket());
  missing.post_json("/code/run", {{"code", "1"}, {"context_id", id}}, false);
  CHECK(missing.read_head() == 404);

  auto bad = post(agent.socket(), "/code/contexts", {{"language", "cobol"}});
  CHECK(bad.status == 400);
  auto nowhere = post(agent.socket(), "/code/contexts", {{"cwd", dir.path() + "/missing"}});
  CHECK(nowhere.status == 400);
}

TEST_CASE("a bash context keeps cwd and variables, a failing last command is an error") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  auto first = run(agent, {{"code", "cd " + dir.path() + "; V=7; echo $FOO"}, {"language", "bash"}, {"env", {{"FOO", "bar"}}}});
  CHECK(first.stdout_text == "bar\n");
  auto second = run(agent, {{"code", "pwd; echo $V ${FOO:-unset}"}, {"language", "bash"}});
  CHECK(second.stdout_text == dir.path() + "\n7 unset\n");
  auto failing = run(agent, {{"code", "false"}, {"language", "bash"}});
  REQUIRE(failing.error);
  CHECK((*failing.error)["value"] == "exit status 1");
  auto slow = run(agent, {{"code", "sleep 30"}, {"language", "bash"}, {"timeout_s", 0.5}});
  CHECK((*slow.end)["timed_out"] == true);
  CHECK(run(agent, {{"code", "echo $V"}, {"language", "bash"}}).stdout_text == "7\n");
}

TEST_CASE("the number of contexts is bounded") {
  temp_dir dir;
  agent_binary agent(dir / "a.sock");
  int made = 0;
  for (; made < 40; ++made) {
    auto r = post(agent.socket(), "/code/contexts", {{"language", "bash"}});
    if (r.status != 201) {
      CHECK(r.status == 409);
      break;
    }
  }
  CHECK(made == 16);
}
