// A program on a pseudo-terminal, without the WebSocket.

#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <fstream>

#include "pty/terminal.hpp"
#include "support.hpp"
#include "sandfort/http/use_tuple.hpp"

using namespace sandfort;
using namespace sandfort::agent::pty;
using sandfort::agent::test::temp_dir;
using sandfort::testing::run_coroutine;
namespace asio = boost::asio;

namespace {


struct finished {
  std::string output;
  int exit_code = -1;
};

// Everything the program writes until no process holds the terminal, then its exit code.
// With interrupt_after, types Ctrl-C once that text has appeared.
asio::awaitable<result<finished>> run_on_terminal(const terminal_spec& spec, const std::string& interrupt_after) {
  auto executor = co_await asio::this_coro::executor;
  auto term = terminal::start(executor, spec);
  if (!term) co_return term.err();
  finished out;
  char chunk[4096];
  bool interrupted = interrupt_after.empty();
  for (;;) {
    auto [ec, n] = co_await term->master().async_read_some(asio::buffer(chunk), use_tuple);
    if (ec) break;  // EIO once the program is gone
    out.output.append(chunk, n);
    if (!interrupted && out.output.find(interrupt_after) != std::string::npos) {
      interrupted = true;
      char ctrl_c = '\x03';
      auto key = asio::buffer(&ctrl_c, 1);
      co_await asio::async_write(term->master(), key, use_tuple);
    }
  }
  co_await term->exited().async_wait(asio::posix::stream_descriptor::wait_read, use_tuple);
  out.exit_code = term->reap();
  co_return out;
}

}  // namespace

TEST_CASE("a terminal has the requested size and is the program's controlling terminal") {
  temp_dir dir;
  terminal_spec spec;
  spec.argv = {"/bin/sh", "-c", "stty size; pwd; echo TERM=$TERM; tty; exit 7"};
  spec.size = {33, 11};
  spec.cwd = dir.path();
  std::string no_interrupt;
  auto done = run_coroutine(run_on_terminal(spec, no_interrupt));
  REQUIRE(done.ok());
  INFO("output: " << done->output);
  CHECK(done->output.find("11 33\r\n") != std::string::npos);
  CHECK(done->output.find(dir.path() + "\r\n") != std::string::npos);
  CHECK(done->output.find("TERM=xterm-256color\r\n") != std::string::npos);
  CHECK(done->output.find("/dev/pts/") != std::string::npos);
  CHECK(done->exit_code == 7);
}

TEST_CASE("the line discipline turns Ctrl-C into SIGINT for the program") {
  terminal_spec spec;
  spec.argv = {"/bin/sh", "-c", "trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.05; done"};
  // ^C is acted on when it arrives, so it is sent once the trap is set (after "ready").
  std::string ready = "ready";
  auto done = run_coroutine(run_on_terminal(spec, ready), std::chrono::seconds(20));
  REQUIRE(done.ok());
  INFO("output: " << done->output);
  CHECK(done->output.find("got-int") != std::string::npos);
  CHECK(done->exit_code == 3);
}

TEST_CASE("a terminal refuses a cwd that is not a directory") {
  temp_dir dir;
  std::ofstream(dir / "file") << "x";
  asio::io_context ioc;
  terminal_spec spec;
  spec.cwd = dir / "missing";
  auto missing = terminal::start(ioc.get_executor(), spec);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.err().code == errc::invalid_argument);
  CHECK(missing.err().message.find("does not exist") != std::string::npos);
  spec.cwd = dir / "file";
  auto file = terminal::start(ioc.get_executor(), spec);
  REQUIRE_FALSE(file.ok());
  CHECK(file.err().message.find("not a directory") != std::string::npos);
}

TEST_CASE("destroying a terminal kills and reaps its whole session") {
  temp_dir dir;
  std::string pid_file = dir / "bg.pid";
  asio::io_context ioc;
  pid_t leader = -1;
  {
    terminal_spec spec;
    spec.argv = {"/bin/sh", "-c", "sleep 1000 & echo $! > " + pid_file + "; exec sleep 1000"};
    auto term = terminal::start(ioc.get_executor(), spec);
    REQUIRE(term.ok());
    leader = term->pid();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sandfort::agent::test::read_file(pid_file).empty() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_t background = std::atoi(sandfort::agent::test::read_file(pid_file).c_str());
  REQUIRE(background > 0);
  CHECK(::kill(leader, 0) != 0);  // reaped, not a zombie
  CHECK(sandfort::agent::test::wait_gone(background, std::chrono::seconds(5)));
}
