#include "process/runner.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "process/child.hpp"
#include "process/oom.hpp"
#include "process/output.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;
using asio::posix::stream_descriptor;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

std::chrono::milliseconds since(steady::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - start);
}

// The shell's convention: 126 found but not executable, 127 not found.
exec_result not_executable(const exec_request& req, const program& prog, int err, steady::time_point start) {
  exec_result r;
  r.exit_code = err == ENOENT || err == ENOTDIR ? 127 : 126;
  r.oom_killed = false;
  const std::string& name = req.argv[0];
  if (prog.path.empty() && err == ENOENT)
    r.stderr_data = "sandfort-agent: " + name + ": command not found\n";
  else
    r.stderr_data = "sandfort-agent: cannot execute " + name + ": " + errno_text(err) + "\n";
  if (r.stderr_data.size() > req.max_output_bytes) {
    r.stderr_data.resize(req.max_output_bytes);
    r.truncated = true;
  }
  r.duration = since(start);
  return r;
}

// A streamed run tells its receiver why the command did not start, as the stderr it would
// have written: the result's stderr_data is what a whole answer carries, which a stream never sends.
asio::awaitable<exec_result> refused(const exec_request& req, exec_result r) {
  if (!req.sink || r.stderr_data.empty()) co_return r;
  output_collector err(output_stream::err, req.max_output_bytes, req.sink);
  co_await err.add(r.stderr_data);
  co_await err.finish();
  r.stderr_data.clear();
  r.abandoned = err.sink_failed();
  co_return r;
}

struct capture {
  capture(const asio::any_io_executor& ex, unique_fd fd, output_stream which, std::size_t limit, output_sink* sink)
      : stream(ex, fd.release()), collector(which, limit, sink) {
    stream.non_blocking(true);
  }

  void stop() {
    stopping = true;
    boost::system::error_code ignored;
    stream.cancel(ignored);
  }

  // Takes what the pipe already holds and nothing more: a background job that inherited the
  // pipe may keep it open (and even keep writing) long after the child is gone.
  asio::awaitable<void> drain_ready() {
    if (at_eof) co_return;  // every writer is gone and everything was read
    int pending = 0;
    if (::ioctl(stream.native_handle(), FIONREAD, &pending) != 0 || pending <= 0) co_return;
    auto buf = pipe_read_buffer();
    while (pending > 0) {
      const std::size_t want = std::min(pipe_read_chunk, static_cast<std::size_t>(pending));
      ssize_t n = ::read(stream.native_handle(), buf.get(), want);
      if (n <= 0) break;
      std::string_view got(buf.get(), static_cast<std::size_t>(n));
      co_await collector.add(got);
      pending -= static_cast<int>(n);
    }
  }

  stream_descriptor stream;
  output_collector collector;
  bool stopping = false;
  bool at_eof = false;
};

struct execution {
  execution(const asio::any_io_executor& ex, pid_t child, unique_fd out, unique_fd err, std::size_t cap,
            output_sink* out_sink)
      : pid(child),
        exited(ex),
        abort_signal(ex, asio::steady_timer::time_point::max()),
        sink(out_sink),
        stdout_capture(ex, std::move(out), output_stream::out, cap, out_sink),
        stderr_capture(ex, std::move(err), output_stream::err, cap, out_sink) {}
  execution(const execution&) = delete;
  execution& operator=(const execution&) = delete;

  // Only reached with an unreaped child when run() is abandoned (its io_context destroyed)
  // or failed half-way: never leave the child running or a zombie behind.
  ~execution() {
    if (reaped) return;
    kill_session(pid);
    reap();
  }

  void reap() {
    int code = agent::reap(pid, &killed_by);
    reaped = true;
    if (code < 0)
      reap_error = errno;
    else
      exit_code = code;
  }

  void stop_io() {
    stdout_capture.stop();
    stderr_capture.stop();
    boost::system::error_code ignored;
    if (stdin_pipe && stdin_pipe->is_open()) stdin_pipe->close(ignored);
  }

  // The receiver of streamed output is gone: stop everything now.
  void abandon() { abort_signal.cancel(); }

  pid_t pid;
  stream_descriptor exited;
  asio::steady_timer abort_signal;
  output_sink* sink;
  capture stdout_capture;
  capture stderr_capture;
  std::optional<stream_descriptor> stdin_pipe;
  bool reaped = false;
  int reap_error = 0;
  int exit_code = 0;
  int killed_by = 0;  // the signal that ended the child, 0 when it exited
  bool timed_out = false;
  bool abandoned = false;
};

// Keeps reading past the cap (discarding) so the child never blocks on a full pipe.
asio::awaitable<void> read_until_eof(execution& x, capture& c) {
  auto buf = pipe_read_buffer();
  while (!c.stopping) {
    auto [ec, n] = co_await c.stream.async_read_some(asio::buffer(buf.get(), pipe_read_chunk), use_tuple);
    std::string_view got(buf.get(), n);
    co_await c.collector.add(got);
    if (c.collector.sink_failed()) x.abandon();
    if (ec == asio::error::eof) c.at_eof = true;
    if (ec) break;
  }
}

asio::awaitable<void> feed_stdin(execution& x, const std::optional<std::string>& data) {
  if (!x.stdin_pipe || !data) co_return;
  // EPIPE when the child closes stdin early is its business, not an error of the call.
  co_await asio::async_write(*x.stdin_pipe, asio::buffer(*data), use_tuple);
  boost::system::error_code ignored;
  if (x.stdin_pipe->is_open()) x.stdin_pipe->close(ignored);
}

// Completes when streamed output has nobody to go to any more; never without a sink.
asio::awaitable<void> receiver_gone(execution& x) {
  using namespace asio::experimental::awaitable_operators;
  if (!x.sink) {
    co_await x.abort_signal.async_wait(use_tuple);
    co_return;
  }
  co_await (x.abort_signal.async_wait(use_tuple) || x.sink->wait_gone());
}

asio::awaitable<void> supervise(execution& x, milliseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(x.exited.get_executor(), timeout);
  auto first = co_await (x.exited.async_wait(stream_descriptor::wait_read, use_tuple) || timer.async_wait(use_tuple) ||
                         receiver_gone(x));
  auto cancelled = (co_await asio::this_coro::cancellation_state).cancelled();
  if (cancelled != asio::cancellation_type::none || (first.index() == 0 && std::get<0>(std::get<0>(first)))) {
    x.stop_io();  // cancelled: run() gives up, and ~execution kills and reaps the child
    co_return;
  }
  if (first.index() != 0) {
    kill_session(x.pid);
    if (first.index() == 1)
      x.timed_out = true;
    else
      x.abandoned = true;
    co_await x.exited.async_wait(stream_descriptor::wait_read, use_tuple);
  }
  x.reap();
  // The child is gone; whatever still holds the pipes is a background job we do not wait for.
  x.stop_io();
}

// Our own SIGKILLs (timeout, abandon) are not the OOM killer's, whatever the count says.
bool killed_by_oom(const execution& x, std::optional<std::uint64_t> kills_before) {
  if (x.killed_by != SIGKILL || x.timed_out || x.abandoned || !kills_before) return false;
  auto kills_after = oom_kill_count(cgroup_root());
  return kills_after && *kills_after > *kills_before;
}

}  // namespace

asio::awaitable<result<exec_result>> run(exec_request req) {
  if (auto valid = validate(req); !valid) co_return std::move(valid).err();
  auto env = merged_environment(req.env);
  auto prog = resolve_program(req.argv[0], search_path(req.env), req.cwd);
  auto started = steady::now();
  if (prog.path.empty()) {
    exec_result r = not_executable(req, prog, prog.error, started);  // named: GCC 12 and temporaries in co_await
    co_return co_await refused(req, std::move(r));
  }

  // A pipe for stdin only when there is something to feed it; otherwise the kept /dev/null.
  std::optional<pipe_ends> in;
  int stdin_source = req.stdin_data ? -1 : null_input();
  if (stdin_source < 0) {
    auto made = make_pipe();
    if (!made) co_return std::move(made).err();
    stdin_source = made->read.get();
    in.emplace(std::move(*made));
  }
  auto out = make_pipe();
  if (!out) co_return std::move(out).err();
  auto err = make_pipe();
  if (!err) co_return std::move(err).err();

  spawn_spec spec{prog.path, req.argv, std::move(env), req.cwd,
                  {{stdin_source, 0}, {out->write.get(), 1}, {err->write.get(), 2}}};
  // Read before the child exists, so that any OOM kill of it comes after.
  auto oom_kills_before = oom_kill_count(cgroup_root());
  pid_t pid = -1;
  int spawn_error = spawn_process(spec, pid);
  if (spawn_error == EAGAIN || spawn_error == ENOMEM)
    co_return make_error(errc::unavailable, "cannot start " + req.argv[0] + ": " + errno_text(spawn_error));
  if (spawn_error != 0) {
    exec_result r = not_executable(req, prog, spawn_error, started);
    co_return co_await refused(req, std::move(r));
  }
  if (in) in->read.reset();
  out->write.reset();
  err->write.reset();

  auto ex = co_await asio::this_coro::executor;
  execution x(ex, pid, std::move(out->read), std::move(err->read), req.max_output_bytes, req.sink);
  auto notifier = exit_notifier(pid);
  if (!notifier) co_return std::move(notifier).err();  // x's destructor kills and reaps the child
  x.exited.assign(notifier->release());
  if (req.stdin_data) {
    x.stdin_pipe.emplace(ex, in->write.release());
    x.stdin_pipe->non_blocking(true);
  } else {
    in.reset();  // the child reads EOF
  }

  {
    using namespace asio::experimental::awaitable_operators;
    co_await (read_until_eof(x, x.stdout_capture) && read_until_eof(x, x.stderr_capture) &&
              feed_stdin(x, req.stdin_data) && supervise(x, req.timeout));
  }
  if (!x.reaped) co_return make_error(errc::unavailable, "the exec of " + req.argv[0] + " was cancelled");
  if (!x.abandoned) {
    co_await x.stdout_capture.drain_ready();
    co_await x.stderr_capture.drain_ready();
    co_await x.stdout_capture.collector.finish();
    co_await x.stderr_capture.collector.finish();
  }
  if (x.reap_error)
    co_return make_error(errc::internal, "cannot collect the exit status of " + req.argv[0] + ": " +
                                             errno_text(x.reap_error));

  exec_result r;
  r.duration = since(started);
  r.timed_out = x.timed_out;
  r.abandoned = x.abandoned || x.stdout_capture.collector.sink_failed() || x.stderr_capture.collector.sink_failed();
  r.exit_code = x.timed_out ? 124 : x.exit_code;
  r.oom_killed = killed_by_oom(x, oom_kills_before);
  r.truncated = x.stdout_capture.collector.truncated() || x.stderr_capture.collector.truncated();
  r.stdout_data = std::move(x.stdout_capture.collector.data());
  r.stderr_data = std::move(x.stderr_capture.collector.data());
  co_return r;
}

}  // namespace sandfort::agent
