// Drives a sandbox's terminal through sandfortd with the project's own WebSocket client, the
// way a person would: checks the size, resizes, types a command and reads it back, exits.
// Run by test_pty.py:  pty_probe PORT SANDBOX_ID API_KEY header|subprotocol
// Prints one line per step; exits 0 when every step saw what it expected.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "support/wsclient.hpp"
#include "support/run_coroutine.hpp"

namespace {

using namespace sandfort;
namespace asio = boost::asio;
using std::chrono::milliseconds;

// Reads terminal output until `want` appears (or an exit frame, or the deadline).
asio::awaitable<bool> read_until(wsclient::client& ws, const std::string& want, std::string& seen) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen.find(want) == std::string::npos) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) co_return false;
    auto f = co_await ws.read(left);
    if (!f || f->is_close) co_return false;
    seen += f->data;
  }
  co_return true;
}

// A send that fails is printed (a step that then fails says why).
asio::awaitable<void> send(wsclient::client& ws, bool text, const std::string& data) {
  // (No co_await inside a conditional expression: GCC 12 miscompiles it.)
  result<void> sent = ok_t{};
  if (text)
    sent = co_await ws.send_text(data);
  else
    sent = co_await ws.send_binary(data);
  if (!sent) std::printf("sending %zu bytes: FAILED %s\n", data.size(), sent.err().message.c_str());
}

asio::awaitable<int> probe(std::uint16_t port, std::string sandbox, std::string key, bool subprotocol,
                           std::string env_check) {
  wsclient::options opts;
  if (subprotocol)
    opts.headers.emplace_back("Sec-WebSocket-Protocol", "bearer." + key);
  else
    opts.headers.emplace_back("Authorization", "Bearer " + key);
  std::string target = "/v1/sandboxes/" + sandbox + "/pty?cols=80&rows=24";
  auto ws = co_await wsclient::client::connect("127.0.0.1", port, target, opts);
  if (!ws) {
    std::printf("connect: FAILED %s\n", ws.err().message.c_str());
    co_return 1;
  }
  if (subprotocol) {
    auto chosen = ws->response_header("Sec-WebSocket-Protocol");
    std::printf("subprotocol echoed: %s\n", chosen ? chosen->c_str() : "(none)");
    if (!chosen || *chosen != "bearer." + key) co_return 1;
  }
  std::string seen;
  int failures = 0;
  const auto started = std::chrono::steady_clock::now();
  auto step = [&](const char* name, bool ok) {
    auto at = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started).count();
    std::printf("%s: %s\n", name, ok ? "ok" : ("FAILED at " + std::to_string(at) + " ms").c_str());
    if (!ok) {
      std::string shown;
      for (char c : seen) shown += (c == '\r' ? std::string("\\r") : c == '\n' ? std::string("\\n") : std::string(1, c));
      std::printf("  terminal said: %s\n", shown.c_str());
    }
    if (!ok) ++failures;
  };

  const std::string size_cmd = "stty size\r";
  co_await send(*ws, false, size_cmd);
  const std::string initial = "24 80";
  step("initial size 24 80", co_await read_until(*ws, initial, seen));

  const std::string resize = R"({"type":"resize","cols":100,"rows":30})";
  co_await send(*ws, true, resize);
  seen.clear();
  co_await send(*ws, false, size_cmd);
  const std::string resized = "30 100";
  step("resized to 30 100", co_await read_until(*ws, resized, seen));

  seen.clear();
  const std::string echo_cmd = "echo h''i\r";  // the echoed line shows h''i; only the output shows hi
  co_await send(*ws, false, echo_cmd);
  const std::string echoed = "hi\r\n";
  step("echo hi read back", co_await read_until(*ws, echoed, seen));

  if (!env_check.empty()) {
    // NAME=VALUE: the terminal's shell has the variable (the echoed line shows "$NAME", only the
    // output shows VALUE followed by '|').
    auto eq = env_check.find('=');
    seen.clear();
    const std::string print_env = "printf '%s|\\n' \"$" + env_check.substr(0, eq) + "\"\r";
    co_await send(*ws, false, print_env);
    const std::string value = env_check.substr(eq + 1) + "|\r\n";
    step("env read back", co_await read_until(*ws, value, seen));
  }

  seen.clear();
  // Ctrl-C must reach `sleep`, not bash before it forks (the line discipline would then
  // flush what was typed): wait until the line runs, and a moment more for the fork.
  const std::string sleeper = "echo st''art; sleep 100\r";
  co_await send(*ws, false, sleeper);
  const std::string running = "start\r\n";
  (void)co_await read_until(*ws, running, seen);
  asio::steady_timer pause(co_await asio::this_coro::executor, milliseconds(300));
  co_await pause.async_wait(asio::use_awaitable);
  const std::string ctrl_c = "\x03";
  co_await send(*ws, false, ctrl_c);
  const std::string after_cmd = "echo af''ter\r";
  co_await send(*ws, false, after_cmd);
  const std::string after = "after\r\n";
  step("ctrl-c interrupted sleep", co_await read_until(*ws, after, seen));

  const std::string exit_cmd = "exit 7\r";
  co_await send(*ws, false, exit_cmd);
  bool exited = false;
  for (int i = 0; i < 200 && !exited; ++i) {
    auto f = co_await ws->read(milliseconds(10'000));
    if (!f || f->is_close) break;
    if (f->is_text && f->data.find("\"exit\"") != std::string::npos) {
      exited = f->data.find("\"exit_code\":7") != std::string::npos;
      std::printf("exit frame: %s\n", f->data.c_str());
      break;
    }
  }
  step("exit code 7 reported", exited);
  co_return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: pty_probe PORT SANDBOX_ID API_KEY header|subprotocol [NAME=VALUE]\n");
    return 2;
  }
  auto port = static_cast<std::uint16_t>(std::stoi(argv[1]));
  bool subprotocol = std::string(argv[4]) == "subprotocol";
  std::string env_check = argc == 6 ? argv[5] : "";
  return sandfort::testing::run_coroutine(probe(port, argv[2], argv[3], subprotocol, env_check), std::chrono::seconds(60));
}
