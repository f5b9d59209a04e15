// The pieces behind sessions, commands and streaming, in-process: limits that the binary
// takes as flags (caps, retention, the shell) are set directly here.

#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <filesystem>

#include "commands/commands.hpp"
#include "process/async.hpp"
#include "process/output.hpp"
#include "session/session.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::agent;
using namespace sandfort::agent::test;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

[[maybe_unused]] const bool sigpipe_ignored = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

// Like run_coroutine, but stops when the coroutine is done: shells and commands keep their
// io_context busy forever. Destroying the context then kills them.
template <typename T>
T drive(asio::awaitable<T> work, std::chrono::seconds limit = std::chrono::seconds(60)) {
  asio::io_context ioc;
  std::optional<T> out;
  std::exception_ptr failure;
  asio::co_spawn(ioc, std::move(work), [&](std::exception_ptr e, T value) {
    if (e)
      failure = e;
    else
      out.emplace(std::move(value));
    ioc.stop();
  });
  ioc.run_for(limit);
  if (failure) std::rethrow_exception(failure);
  if (!out) throw std::runtime_error("the coroutine did not finish in time");
  return std::move(*out);
}

asio::awaitable<void> pause(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// Restores the defaults however a test ends.
struct limits_guard {
  ~limits_guard() {
    commands::configure(commands::limits{});
    sessions::configure(sessions::limits{});
  }
};

class collecting_sink final : public output_sink {
 public:
  asio::awaitable<bool> write(output_stream which, std::string_view bytes) override {
    chunks.emplace_back(which, std::string(bytes));
    co_return true;
  }
  asio::awaitable<void> wait_gone() override {
    asio::steady_timer never(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
    co_await never.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  std::string all(output_stream which) const {
    std::string out;
    for (const auto& [w, b] : chunks)
      if (w == which) out += b;
    return out;
  }
  std::vector<std::pair<output_stream, std::string>> chunks;
};

}  // namespace

TEST_CASE("complete_utf8_prefix holds back only a sequence that may still complete") {
  CHECK(complete_utf8_prefix("") == 0);
  CHECK(complete_utf8_prefix("abc") == 3);
  CHECK(complete_utf8_prefix("a\xc3") == 1);
  CHECK(complete_utf8_prefix("a\xc3\xa9") == 3);
  CHECK(complete_utf8_prefix("\xe2\x82") == 0);
  CHECK(complete_utf8_prefix("\xe2\x82\xac") == 3);
  CHECK(complete_utf8_prefix("x\xf0\x9f\x98") == 1);
  CHECK(complete_utf8_prefix("x\xf0\x9f\x98\x80") == 5);
  CHECK(complete_utf8_prefix("\xff") == 1);     // invalid: passed on (and replaced later)
  CHECK(complete_utf8_prefix("\x80\x80") == 2);  // stray continuation bytes too
}

TEST_CASE("output_collector caps, keeps, or forwards whole characters") {
  SECTION("kept, with a cap") {
    output_collector c(output_stream::out, 5, nullptr);
    std::string_view a = "abc", b = "defgh";
    drive([&]() -> asio::awaitable<bool> {
      co_await c.add(a);
      co_await c.add(b);
      co_return true;
    }());
    CHECK(c.data() == "abcde");
    CHECK(c.truncated());
  }
  SECTION("forwarded") {
    collecting_sink sink;
    output_collector c(output_stream::err, 100, &sink);
    std::string_view first = "x\xc3", second = "\xa9y", last = "\xe2\x82";
    drive([&]() -> asio::awaitable<bool> {
      co_await c.add(first);
      co_await c.add(second);
      co_await c.add(last);
      co_await c.finish();
      co_return true;
    }());
    REQUIRE(sink.chunks.size() == 3);
    CHECK(sink.chunks[0].second == "x");
    CHECK(sink.chunks[1].second == "\xc3\xa9y");
    CHECK(sink.chunks[2].second == "\xe2\x82");  // the stream ended: what is left goes out
    CHECK(sink.chunks[0].first == output_stream::err);
    CHECK(c.data().empty());
  }
}

TEST_CASE("fifo_mutex hands over in arrival order, notifier never loses a change") {
  asio::io_context ioc;
  fifo_mutex m;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    asio::co_spawn(
        ioc,
        [&, i]() -> asio::awaitable<void> {
          co_await m.lock();
          fifo_lock held(m);
          order.push_back(i);
          co_await pause(std::chrono::milliseconds(5 - i));
        },
        asio::detached);
  }
  ioc.run();
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
  CHECK_FALSE(m.locked());

  notifier n;
  auto seen = n.version();
  n.notify_all();  // before anyone waits
  bool woke = false;
  asio::io_context ioc2;
  asio::co_spawn(
      ioc2,
      [&]() -> asio::awaitable<void> {
        co_await n.wait(seen);  // returns at once: it changed since `seen`
        woke = true;
      },
      asio::detached);
  ioc2.run_for(1s);
  CHECK(woke);
}

TEST_CASE("log_ring keeps the newest bytes and counts what it dropped") {
  commands::log_ring r(10);
  r.append("hello");
  CHECK(r.text() == "hello");
  CHECK(r.begin() == 0);
  CHECK(r.end() == 5);
  r.append("world!!");
  CHECK(r.text() == "[sandfort: 2 bytes dropped]\nllowor" "ld!!");
  CHECK(r.begin() == 2);
  CHECK(r.read_from(0) == "lloworld!!");
  CHECK(r.read_from(9) == "d!!");
  r.append(std::string(25, 'x'));
  CHECK(r.begin() == 27);
  CHECK(r.end() == 37);
  CHECK(r.read_from(30) == std::string(7, 'x'));
}

TEST_CASE("command logs are capped with a marker, the follower is told what it missed") {
  limits_guard restore;
  commands::limits l;
  l.log_cap = 1000;
  commands::configure(l);
  drive([]() -> asio::awaitable<bool> {
    auto ex = co_await asio::this_coro::executor;
    auto& reg = commands::registry::of(ex);
    auto started = reg.start(ex, {"head -c 5000 /dev/zero | tr '\\0' a; printf END", "", {}});
    REQUIRE(started);
    while (reg.get(started->id)->running) co_await pause(10ms);
    auto logs = reg.logs(started->id);
    REQUIRE(logs);
    CHECK(logs->dropped_bytes == 4003);
    CHECK(logs->stdout_text == "[sandfort: 4003 bytes dropped]\n" + std::string(997, 'a') + "END");
    collecting_sink sink;
    auto followed = co_await reg.follow(started->id, sink);
    REQUIRE(followed);
    CHECK(*followed == std::optional<int>(0));
    CHECK(sink.all(output_stream::out) == logs->stdout_text);
    co_return true;
  }());
}

TEST_CASE("finished commands are forgotten after the retention time, running ones never") {
  limits_guard restore;
  commands::limits l;
  l.retention = 300ms;
  l.max_commands = 2;
  commands::configure(l);
  drive([]() -> asio::awaitable<bool> {
    auto ex = co_await asio::this_coro::executor;
    auto& reg = commands::registry::of(ex);
    auto quick = reg.start(ex, {"exit 3", "", {}});
    auto slow = reg.start(ex, {"exec sleep 100", "", {}});
    REQUIRE(quick);
    REQUIRE(slow);
    while (reg.get(quick->id)->running) co_await pause(10ms);
    CHECK(reg.get(quick->id)->exit_code == std::optional<int>(3));
    co_await pause(600ms);
    CHECK(reg.get(quick->id).err().code == errc::not_found);
    CHECK(reg.get(slow->id));

    // At the limit: an exited command makes room, running ones do not.
    auto second = reg.start(ex, {"exec sleep 100", "", {}});
    REQUIRE(second);
    auto refused = reg.start(ex, {"true", "", {}});
    REQUIRE_FALSE(refused);
    CHECK(refused.err().code == errc::conflict);
    REQUIRE(reg.signal(second->id, SIGKILL));
    while (reg.get(second->id)->running) co_await pause(10ms);
    auto third = reg.start(ex, {"true", "", {}});
    REQUIRE(third);
    CHECK(reg.get(second->id).err().code == errc::not_found);  // the oldest exited one went
    CHECK(reg.list().size() == 2);
    co_return true;
  }());
}

TEST_CASE("running commands die with their io_context") {
  pid_t pid = 0;
  drive([&]() -> asio::awaitable<bool> {
    auto ex = co_await asio::this_coro::executor;
    auto started = commands::registry::of(ex).start(ex, {"exec sleep 100", "", {}});
    REQUIRE(started);
    pid = started->pid;
    co_return true;
  }());
  REQUIRE(pid > 0);
  CHECK(::kill(pid, 0) != 0);  // killed and reaped
}

TEST_CASE("session output is capped per stream") {
  limits_guard restore;
  sessions::limits l;
  l.output_cap = 100;
  sessions::configure(l);
  drive([]() -> asio::awaitable<bool> {
    auto ex = co_await asio::this_coro::executor;
    auto& reg = sessions::registry::of(ex);
    std::string name = "default";
    sessions::exec_params p;
    p.command = "head -c 100000 /dev/zero | tr '\\0' a; echo short >&2";
    auto r = co_await reg.exec(name, p);
    REQUIRE(r);
    CHECK(r->result.stdout_data == std::string(100, 'a'));
    CHECK(r->result.stderr_data == "short\n");
    CHECK(r->result.truncated);
    CHECK(r->result.exit_code == 0);
    co_return true;
  }());
}

TEST_CASE("a failing session command is named as bash names it, not by the file that carries it") {
  limits_guard restore;
  temp_dir dir;
  drive([&]() -> asio::awaitable<bool> {
    auto ex = co_await asio::this_coro::executor;
    auto& reg = sessions::registry::of(ex);
    std::string name = "default";
    sessions::exec_params a;
    a.command = "cd / && cd " + dir.path() + "; declare -A M=([k]=v); X=1; return 3; echo not-reached";
    auto first = co_await reg.exec(name, a);
    REQUIRE(first);
    CHECK(first->result.exit_code == 3);
    CHECK(first->result.stdout_data.empty());
    // Line numbers count from the command's own first line, functions defined in it included.
    sessions::exec_params b;
    b.command = "true\ncd /nope-sandfort\nf() {\n  cd /nope-too\n}\nf";
    auto failed = co_await reg.exec(name, b);
    REQUIRE(failed);
    CHECK(failed->result.exit_code == 1);
    CHECK(failed->result.stderr_data ==
          "bash: line 2: cd: /nope-sandfort: No such file or directory\n"
          "bash: line 4: cd: /nope-too: No such file or directory\n");
    // The state of the shell carries over: the directory, OLDPWD, variables (declared ones too),
    // functions; nothing of the visit to the session's directory shows.
    sessions::exec_params c;
    c.command = "pwd; echo \"$OLDPWD X=$X ${M[k]} ${__sandfort_d-clean}\"; f 2>&1";
    auto after = co_await reg.exec(name, c);
    REQUIRE(after);
    CHECK(after->result.stdout_data ==
          dir.path() + "\n/ X=1 v clean\nbash: line 4: cd: /nope-too: No such file or directory\n");
    // The options that change how `.` finds a name are the caller's to keep.
    sessions::exec_params d;
    d.command = "set -o posix; shopt -u sourcepath";
    REQUIRE(co_await reg.exec(name, d));
    sessions::exec_params e;
    e.command = "shopt -qo posix && echo posix; shopt -q sourcepath || echo no-sourcepath; cd /nope";
    auto kept = co_await reg.exec(name, e);
    REQUIRE(kept);
    CHECK(kept->result.stdout_data == "posix\nno-sourcepath\n");
    CHECK(kept->result.stderr_data == "bash: line 1: cd: /nope: No such file or directory\n");
    co_return true;
  }());
}

TEST_CASE("sessions fall back to sh with the same semantics") {
  limits_guard restore;
  sessions::limits l;
  l.shell = "/bin/sh";
  l.abort_grace = 1000ms;
  sessions::configure(l);
  temp_dir dir;
  drive([&]() -> asio::awaitable<bool> {
    auto ex = co_await asio::this_coro::executor;
    auto& reg = sessions::registry::of(ex);
    std::string name = "default";
    auto run_one = [&](const std::string& command, std::chrono::milliseconds timeout) {
      auto p = std::make_shared<sessions::exec_params>();
      p->command = command;
      p->timeout = timeout;
      return std::make_pair(p, reg.exec(name, *p));
    };
    const std::string c1 = "cd " + dir.path() + "; export V=1; f() { echo fn; }";
    auto [p1, a1] = run_one(c1, 0ms);
    auto cd = co_await std::move(a1);
    REQUIRE(cd);
    const std::string c2 = "pwd; echo $V; f; echo err >&2";
    auto [p2, a2] = run_one(c2, 0ms);
    auto check = co_await std::move(a2);
    REQUIRE(check);
    CHECK(check->result.stdout_data == dir.path() + "\n1\nfn\n");
    CHECK(check->result.stderr_data == "err\n");
    const std::string c3 = "sleep 30";
    auto [p3, a3] = run_one(c3, 300ms);
    auto slow = co_await std::move(a3);
    REQUIRE(slow);
    CHECK(slow->result.exit_code == 124);
    CHECK(slow->result.timed_out);
    const std::string c4 = "pwd";
    auto [p4, a4] = run_one(c4, 0ms);
    auto after = co_await std::move(a4);
    REQUIRE(after);
    CHECK(after->result.stdout_data == dir.path() + "\n");
    const std::string c5 = "exit 6";
    auto [p5, a5] = run_one(c5, 0ms);
    auto bye = co_await std::move(a5);
    REQUIRE(bye);
    CHECK(bye->result.exit_code == 6);
    CHECK(bye->session_restarted);
    const std::string c6 = "echo \"V=$V\"";
    auto [p6, a6] = run_one(c6, 0ms);
    auto fresh = co_await std::move(a6);
    REQUIRE(fresh);
    CHECK(fresh->result.stdout_data == "V=\n");
    co_return true;
  }());
}

TEST_CASE("a shell that ignores the timeout signal is replaced") {
  limits_guard restore;
  sessions::limits l;
  l.abort_grace = 300ms;
  sessions::configure(l);
  drive([&]() -> asio::awaitable<bool> {
    auto ex = co_await asio::this_coro::executor;
    auto& reg = sessions::registry::of(ex);
    std::string name = "default";
    sessions::exec_params p;
    p.command = "export GONE=1; trap '' USR2; while :; do :; done";
    p.timeout = 200ms;
    auto r = co_await reg.exec(name, p);
    REQUIRE(r);
    CHECK(r->result.exit_code == 124);
    CHECK(r->result.timed_out);
    CHECK(r->session_restarted);
    sessions::exec_params q;
    q.command = "echo \"GONE=$GONE\"";
    auto next = co_await reg.exec(name, q);
    REQUIRE(next);
    CHECK(next->result.stdout_data == "GONE=\n");
    CHECK_FALSE(next->session_restarted);
    co_return true;
  }());
}

TEST_CASE("a session's files are made again when removed behind its back") {
  limits_guard restore;
  temp_dir dir;
  sessions::limits l;
  l.runtime_dir = dir.path();
  sessions::configure(l);
  drive([&]() -> asio::awaitable<bool> {
    auto ex = co_await asio::this_coro::executor;
    auto& reg = sessions::registry::of(ex);
    std::string name = "default";
    sessions::exec_params first;
    first.command = "export KEPT=yes; echo one";
    auto a = co_await reg.exec(name, first);
    REQUIRE(a);
    CHECK(a->result.stdout_data == "one\n");
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) std::filesystem::remove_all(entry);
    sessions::exec_params second;
    second.command = "echo two $KEPT; echo err >&2";
    auto b = co_await reg.exec(name, second);
    REQUIRE(b);
    CHECK(b->result.stdout_data == "two yes\n");
    CHECK(b->result.stderr_data == "err\n");
    CHECK_FALSE(b->session_restarted);
    co_return true;
  }());
}
