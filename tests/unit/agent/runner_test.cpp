#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "process/oom.hpp"
#include "process/runner.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::agent;
using namespace sandfort::agent::test;
using namespace std::chrono_literals;

namespace {

// The runner's documented precondition, as in the agent's main().
[[maybe_unused]] const bool sigpipe_ignored = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

exec_result must_run(exec_request req) {
  auto r = run_sync(std::move(req));
  if (!r) FAIL("run failed: " << r.err().message);
  return std::move(r).value();
}

std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  std::istringstream in(read_file(path));
  for (long pid = 0; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

struct pidfd_off {
  pidfd_off() { detail::use_pidfd(false); }
  ~pidfd_off() { detail::use_pidfd(true); }
};

}  // namespace

TEST_CASE("stdout and stderr are captured separately") {
  auto r = must_run(shell("echo out; echo err >&2; echo more"));
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data == "out\nmore\n");
  CHECK(r.stderr_data == "err\n");
  CHECK_FALSE(r.timed_out);
  CHECK_FALSE(r.truncated);
}

TEST_CASE("argv runs without a shell and is looked up in PATH") {
  exec_request req;
  req.argv = {"printf", "%s|", "a b", "$HOME", "*"};
  auto r = must_run(req);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data == "a b|$HOME|*|");
}

TEST_CASE("exit codes are honest") {
  CHECK(must_run(shell("exit 7")).exit_code == 7);
  CHECK(must_run(shell("exit 0")).exit_code == 0);
  SECTION("killed by a signal is 128+N") {
    CHECK(must_run(shell("kill -9 $$")).exit_code == 137);
    CHECK(must_run(shell("kill -TERM $$")).exit_code == 143);
  }
}

TEST_CASE("a program that cannot be executed gives 127 or 126 with a message") {
  temp_dir dir;
  SECTION("missing path") {
    exec_request req;
    req.argv = {"/nonexistent/sfa-prog"};
    auto r = must_run(req);
    CHECK(r.exit_code == 127);
    CHECK(r.stderr_data.find("/nonexistent/sfa-prog") != std::string::npos);
    CHECK(r.stderr_data.find("No such file or directory") != std::string::npos);
  }
  SECTION("not in PATH") {
    exec_request req;
    req.argv = {"sfa-no-such-command"};
    auto r = must_run(req);
    CHECK(r.exit_code == 127);
    CHECK(r.stderr_data == "sandfort-agent: sfa-no-such-command: command not found\n");
  }
  SECTION("not executable") {
    std::string file = dir / "plain";
    std::ofstream(file) << "echo hi\n";
    ::chmod(file.c_str(), 0644);
    exec_request req;
    req.argv = {file};
    auto r = must_run(req);
    CHECK(r.exit_code == 126);
    CHECK(r.stderr_data.find("Permission denied") != std::string::npos);
  }
  SECTION("PATH comes from the merged environment") {
    std::string tool = dir / "sfa-tool";
    std::ofstream(tool) << "#!/bin/sh\necho found-$1\n";
    ::chmod(tool.c_str(), 0755);
    exec_request req;
    req.argv = {"sfa-tool", "x"};
    req.env["PATH"] = "/nonexistent:" + dir.path();
    auto r = must_run(req);
    CHECK(r.exit_code == 0);
    CHECK(r.stdout_data == "found-x\n");
  }
}

TEST_CASE("the child gets its own session and process group") {
  auto r = must_run(shell("read -r pid comm state ppid pgrp sid rest < /proc/$$/stat; echo $$ $pgrp $sid"));
  REQUIRE(r.exit_code == 0);
  std::istringstream in(r.stdout_data);
  long pid = 0, pgrp = 0, sid = 0;
  in >> pid >> pgrp >> sid;
  CHECK(pid > 0);
  CHECK(pgrp == pid);
  CHECK(sid == pid);
}

TEST_CASE("the child starts with default signals and no inherited descriptors") {
  exec_request req;
  req.argv = {"grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"};
  std::istringstream status(must_run(req).stdout_data);
  std::string label;
  unsigned long long blocked = ~0ull, ignored = ~0ull;
  status >> label >> std::hex >> blocked >> label >> ignored;
  CHECK(blocked == 0);
  // Nothing the agent ignores (SIGPIPE above all) stays ignored. glibc's posix_spawn leaves
  // its own two internal signals (32, 33) ignored; glibc programs reinstall them at start-up.
  CHECK((ignored & 0x7fffffffull) == 0);

  int leaked = ::fcntl(::open("/dev/null", O_RDONLY), F_DUPFD, 100);  // deliberately not close-on-exec
  REQUIRE(leaked >= 100);
  auto r = must_run(shell("[ -e /proc/$$/fd/" + std::to_string(leaked) + " ] && echo leaked || echo closed"));
  ::close(leaked);
  CHECK(r.stdout_data == "closed\n");
}

TEST_CASE("a timeout kills the child and reports 124") {
  exec_request req = shell("echo before; sleep 30");
  req.timeout = 200ms;
  auto r = must_run(req);
  CHECK(r.exit_code == 124);
  CHECK(r.timed_out);
  CHECK(r.stdout_data == "before\n");
}

TEST_CASE("a timeout kills the whole process group and session") {
  // Orphans are reparented to us, so we can tell dead (reaped) from alive.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  temp_dir dir;
  std::string pids = dir / "pids";
  SECTION("background and foreground members of the group") {
    exec_request req =
        shell("sleep 1000 & echo $! > " + pids + "; sleep 1000 & echo $! >> " + pids + "; echo $$ >> " + pids + "; wait");
    req.timeout = 1500ms;  // room to write the pid file on a loaded machine
    auto r = must_run(req);
    CHECK(r.exit_code == 124);
    CHECK(r.timed_out);
  }
  SECTION("a job that moved to a process group of its own") {
    exec_request req;
    req.argv = {"/bin/bash", "-c", "set -m; sleep 1000 & echo $! > " + pids + "; echo $$ >> " + pids + "; wait"};
    req.timeout = 1500ms;
    auto r = must_run(req);
    CHECK(r.exit_code == 124);
  }
  auto recorded = read_pids(pids);
  REQUIRE(recorded.size() >= 2);
  for (pid_t pid : recorded) {
    INFO("pid " << pid);
    CHECK(wait_gone(pid));
    CHECK(::kill(pid, 0) == -1);
  }
}

TEST_CASE("stdin is delivered, then closed") {
  SECTION("small") {
    exec_request req;
    req.argv = {"cat"};
    req.stdin_data = "hello\nworld";
    CHECK(must_run(req).stdout_data == "hello\nworld");
  }
  SECTION("larger than any pipe buffer, echoed back while it is written") {
    std::string big(3u << 20, 'x');
    for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = '\n';
    exec_request req;
    req.argv = {"cat"};
    req.stdin_data = big;
    auto r = must_run(req);
    CHECK(r.exit_code == 0);
    CHECK(r.stdout_data == big);
  }
  SECTION("absent stdin reads as EOF") {
    exec_request req;
    req.argv = {"cat"};
    auto r = must_run(req);
    CHECK(r.exit_code == 0);
    CHECK(r.stdout_data.empty());
  }
  SECTION("a child that never reads stdin") {
    exec_request req = shell("exec 0<&-; echo done");
    req.stdin_data = std::string(4u << 20, 'y');
    auto r = must_run(req);
    CHECK(r.exit_code == 0);
    CHECK(r.stdout_data == "done\n");
  }
}

TEST_CASE("cwd is honored and checked") {
  temp_dir dir;
  exec_request req;
  req.argv = {"pwd"};
  req.cwd = dir.path();
  CHECK(must_run(req).stdout_data == dir.path() + "\n");

  req.cwd = dir / "missing";
  auto missing = run_sync(req);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.err().code == errc::invalid_argument);
  CHECK(missing.err().message == "cwd '" + dir.path() + "/missing' does not exist");

  std::string file = dir / "file";
  std::ofstream(file) << "x";
  req.cwd = file;
  auto not_dir = run_sync(req);
  REQUIRE_FALSE(not_dir.ok());
  CHECK(not_dir.err().message == "cwd '" + file + "' is not a directory");
}

TEST_CASE("env is merged over the agent's environment") {
  ::setenv("SFA_BASE", "base", 1);
  ::setenv("SFA_OVER", "old", 1);
  exec_request req = shell("echo \"$SFA_BASE $SFA_OVER $SFA_NEW\"");
  req.env = {{"SFA_OVER", "new"}, {"SFA_NEW", "added"}};
  CHECK(must_run(req).stdout_data == "base new added\n");
  ::unsetenv("SFA_BASE");
  ::unsetenv("SFA_OVER");
}

TEST_CASE("requests that cannot be valid are rejected before anything runs") {
  exec_request req;
  auto empty = run_sync(req);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.err().message == "argv must not be empty");

  req.argv = {"echo", std::string("a\0b", 3)};
  auto nul = run_sync(req);
  REQUIRE_FALSE(nul.ok());
  CHECK(nul.err().message == "argv[1] contains a NUL byte");

  req.argv = {"true"};
  req.env = {{"A=B", "x"}};
  auto bad_key = run_sync(req);
  REQUIRE_FALSE(bad_key.ok());
  CHECK(bad_key.err().code == errc::invalid_argument);
}

TEST_CASE("output beyond the cap is dropped, and the child is never blocked") {
  auto r = must_run(shell("head -c 20000000 /dev/zero"));
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_data.size() == (std::size_t{10} << 20));
  CHECK(r.truncated);
  CHECK_FALSE(r.timed_out);

  exec_request small = shell("echo 0123456789; echo abcdefghij >&2");
  small.max_output_bytes = 4;
  auto s = must_run(small);
  CHECK(s.stdout_data == "0123");
  CHECK(s.stderr_data == "abcd");
  CHECK(s.truncated);
}

TEST_CASE("raw bytes survive") {
  auto r = must_run(shell("printf '\\377\\376abc\\200'"));
  CHECK(r.stdout_data == std::string("\xff\xfe" "abc\x80"));
}

TEST_CASE("a background job holding the pipes does not keep the call waiting") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  SECTION("a silent one") {
    exec_request req = shell("sleep 100 & echo $!");
    req.timeout = 30s;  // a wrong implementation waits here and fails on timed_out
    auto r = must_run(req);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.timed_out);
    pid_t sleeper = static_cast<pid_t>(std::stol(r.stdout_data));
    CHECK(::kill(sleeper, 0) == 0);  // not ours to kill: background jobs outlive the call
    ::kill(sleeper, SIGKILL);
    CHECK(wait_gone(sleeper));
  }
  SECTION("one that never stops writing") {
    exec_request req = shell("yes & echo $! >&2");
    req.timeout = 30s;
    auto r = must_run(req);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.timed_out);
    pid_t writer = static_cast<pid_t>(std::stol(r.stderr_data));
    CHECK(wait_gone(writer));  // SIGPIPE once we closed the read end
  }
}

TEST_CASE("20 concurrent execs on one io_context keep their output apart") {
  boost::asio::io_context ioc{1};
  constexpr int n = 20;
  std::vector<std::optional<result<exec_result>>> results(n);
  for (int i = 0; i < n; ++i) {
    exec_request req = shell("i=0; while [ $i -lt 300 ]; do echo out-$TAG-$i; echo err-$TAG-$i >&2; i=$((i+1)); done; "
                             "cat; exit $TAG");
    req.env["TAG"] = std::to_string(i);
    req.stdin_data = "in-" + std::to_string(i) + "\n";
    boost::asio::co_spawn(
        ioc, [&results, i, req = std::move(req)]() -> boost::asio::awaitable<void> {
          results[static_cast<std::size_t>(i)].emplace(co_await run(req));
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
  }
  ioc.run();
  for (int i = 0; i < n; ++i) {
    INFO("exec " << i);
    auto& r = results[static_cast<std::size_t>(i)];
    REQUIRE(r);
    REQUIRE(r->ok());
    std::string want_out, want_err;
    for (int k = 0; k < 300; ++k) {
      want_out += "out-" + std::to_string(i) + "-" + std::to_string(k) + "\n";
      want_err += "err-" + std::to_string(i) + "-" + std::to_string(k) + "\n";
    }
    want_out += "in-" + std::to_string(i) + "\n";
    CHECK((*r)->exit_code == i);
    CHECK((*r)->stdout_data == want_out);
    CHECK((*r)->stderr_data == want_err);
  }
}

TEST_CASE("without pidfd_open, exits are still noticed without polling") {
  pidfd_off off;
  CHECK(must_run(shell("echo hi; exit 3")).exit_code == 3);
  exec_request req = shell("sleep 30");
  req.timeout = 200ms;
  auto r = must_run(req);
  CHECK(r.exit_code == 124);
  CHECK(r.timed_out);
}

TEST_CASE("a cancelled run kills and reaps its child") {
  using namespace boost::asio::experimental::awaitable_operators;
  temp_dir dir;
  std::string pid_file = dir / "pid";
  boost::asio::io_context ioc{1};
  bool cancelled_with_error = false;
  boost::asio::co_spawn(
      ioc,
      [&]() -> boost::asio::awaitable<void> {
        exec_request req = shell("echo $$ > " + pid_file + "; exec sleep 1000");
        boost::asio::steady_timer give_up(ioc, 500ms);
        auto first = co_await (run(req) || give_up.async_wait(boost::asio::use_awaitable));
        cancelled_with_error = first.index() == 1;
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ioc.run();
  CHECK(cancelled_with_error);
  auto pids = read_pids(pid_file);
  REQUIRE(pids.size() == 1);
  CHECK(::kill(pids[0], 0) == -1);  // killed and reaped before run() finished
}

namespace {

// A fake cgroup tree for the OOM counter; the real root comes back at the end of the test.
class fake_cgroup {
 public:
  fake_cgroup() : old_root_(cgroup_root()) { set_cgroup_root(dir_.path()); }
  ~fake_cgroup() { set_cgroup_root(old_root_); }
  fake_cgroup(const fake_cgroup&) = delete;
  fake_cgroup& operator=(const fake_cgroup&) = delete;

  // cgroup v1: <root>/memory/memory.oom_control.
  std::string v1_file() {
    std::filesystem::create_directories(dir_ / "memory");
    std::string file = dir_ / "memory/memory.oom_control";
    std::ofstream(file) << "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n";
    return file;
  }
  // cgroup v2: <root>/memory.events.
  std::string v2_file() {
    std::string file = dir_ / "memory.events";
    std::ofstream(file) << "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n";
    return file;
  }

 private:
  temp_dir dir_;
  std::string old_root_;
};

// What the kernel does when its OOM killer picks the command: count, then SIGKILL it.
std::string oom_killed_by_hand(const std::string& counter_file) {
  return "printf 'oom_kill_disable 0\\nunder_oom 1\\noom_kill 1\\n' > " + counter_file + "; kill -9 $$";
}

}  // namespace

TEST_CASE("a SIGKILL while the cgroup's OOM-kill count goes up is reported as an OOM kill") {
  fake_cgroup cgroup;

  SECTION("cgroup v1") {
    auto r = must_run(shell(oom_killed_by_hand(cgroup.v1_file())));
    CHECK(r.exit_code == 137);
    CHECK(r.oom_killed == true);
  }

  SECTION("cgroup v2") {
    std::string file = cgroup.v2_file();
    auto r = must_run(shell("printf 'oom 2\\noom_kill 1\\n' > " + file + "; kill -9 $$"));
    CHECK(r.exit_code == 137);
    CHECK(r.oom_killed == true);
  }
}

TEST_CASE("other deaths and exits are not OOM kills") {
  fake_cgroup cgroup;
  std::string file = cgroup.v1_file();

  SECTION("a plain SIGKILL, the count unchanged") {
    auto r = must_run(shell("kill -9 $$"));
    CHECK(r.exit_code == 137);
    CHECK(r.oom_killed == false);
  }
  SECTION("a normal exit") {
    auto r = must_run(shell("echo fine"));
    CHECK(r.exit_code == 0);
    CHECK(r.oom_killed == false);
  }
  SECTION("exit 137 while the count goes up (a child was the victim, not the command)") {
    auto r = must_run(shell("printf 'oom_kill 1\\n' > " + file + "; exit 137"));
    CHECK(r.exit_code == 137);
    CHECK(r.oom_killed == false);
  }
  SECTION("another signal while the count goes up") {
    auto r = must_run(shell("printf 'oom_kill 1\\n' > " + file + "; kill -15 $$"));
    CHECK(r.exit_code == 143);
    CHECK(r.oom_killed == false);
  }
  SECTION("our own SIGKILL at the timeout") {
    exec_request req = shell("printf 'oom_kill 1\\n' > " + file + "; sleep 30");
    req.timeout = 300ms;
    auto r = must_run(req);
    CHECK(r.timed_out);
    CHECK(r.oom_killed == false);
  }
  SECTION("a program that cannot be executed") {
    exec_request req;
    req.argv = {"sandfort-no-such-program"};
    auto r = must_run(req);
    CHECK(r.exit_code == 127);
    CHECK(r.oom_killed == false);
  }
}

TEST_CASE("without an OOM-kill counter, a SIGKILL is not an OOM kill") {
  fake_cgroup cgroup;  // neither memory/memory.oom_control nor memory.events
  auto r = must_run(shell("kill -9 $$"));
  CHECK(r.exit_code == 137);
  CHECK(r.oom_killed == false);
}
