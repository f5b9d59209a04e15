#include "git/run.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

#include "git/credentials.hpp"
#include "process/child.hpp"
#include "process/output.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent::git {
namespace {

namespace asio = boost::asio;
using asio::posix::stream_descriptor;
using steady = std::chrono::steady_clock;

struct capture {
  capture(const asio::any_io_executor& ex, unique_fd fd, std::size_t limit) : stream(ex, fd.release()), cap(limit) {
    stream.non_blocking(true);
  }
  void add(std::string_view bytes) {
    std::size_t room = cap > data.size() ? cap - data.size() : 0;
    if (bytes.size() > room) truncated = true;
    data.append(bytes.substr(0, std::min(room, bytes.size())));
  }
  // What the pipe holds now, and nothing more: a process git left behind may keep it open.
  void drain_ready() {
    int pending = 0;
    if (!stream.is_open() || ::ioctl(stream.native_handle(), FIONREAD, &pending) != 0 || pending <= 0) return;
    auto buf = pipe_read_buffer();
    while (pending > 0) {
      const std::size_t want = std::min(pipe_read_chunk, static_cast<std::size_t>(pending));
      ssize_t n = ::read(stream.native_handle(), buf.get(), want);
      if (n <= 0) break;
      add(std::string_view(buf.get(), static_cast<std::size_t>(n)));
      pending -= static_cast<int>(n);
    }
  }
  void stop() {
    stopping = true;
    boost::system::error_code ignored;
    stream.cancel(ignored);
  }

  stream_descriptor stream;
  std::size_t cap;
  std::string data;
  bool truncated = false;
  bool stopping = false;
};

asio::awaitable<void> read_until_eof(capture& c) {
  auto buf = pipe_read_buffer();
  while (!c.stopping) {
    auto [ec, n] = co_await c.stream.async_read_some(asio::buffer(buf.get(), pipe_read_chunk), use_tuple);
    c.add(std::string_view(buf.get(), n));
    if (ec) break;
  }
}

struct child_guard {
  pid_t pid = -1;
  bool reaped = false;
  // Only with run_git abandoned half-way (its io_context going away): never leave it running.
  ~child_guard() {
    if (pid <= 0 || reaped) return;
    kill_session(pid);
    agent::reap(pid);
  }
};

asio::awaitable<void> supervise(child_guard& child, stream_descriptor& exited, std::chrono::milliseconds timeout,
                                capture& out, capture& err, bool& timed_out, int& code) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(exited.get_executor(), timeout);
  auto first = co_await (exited.async_wait(stream_descriptor::wait_read, use_tuple) || timer.async_wait(use_tuple));
  if (first.index() == 1) {
    kill_session(child.pid);
    timed_out = true;
    co_await exited.async_wait(stream_descriptor::wait_read, use_tuple);
  }
  code = agent::reap(child.pid);
  child.reaped = true;
  out.stop();
  err.stop();
}

exec_result not_found(const std::string& message, steady::time_point started) {
  exec_result r;
  r.exit_code = 127;
  r.stderr_data = "sandfort-agent: " + message + "\n";
  r.duration = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - started);
  return r;
}

}  // namespace

asio::awaitable<result<exec_result>> run_git(const command& cmd, const std::optional<credentials>& creds,
                                             run_options options) {
  auto started = steady::now();
  exec_request shape;
  shape.argv = cmd.argv;
  shape.cwd = cmd.cwd;
  shape.env = cmd.env;
  if (auto valid = validate(shape); !valid) co_return std::move(valid).err();
  auto prog = resolve_program(cmd.argv[0], search_path(cmd.env), cmd.cwd);
  if (prog.path.empty())
    co_return not_found(cmd.argv[0] + ": command not found (is git installed in this sandbox?)", started);

  // Every source above every target (0-3), so no dup2 clobbers another.
  unique_fd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!in || !lift_fd(in, 4)) co_return make_error(errc::unavailable, "cannot open /dev/null: " + errno_text(errno));
  auto out = make_pipe();
  if (!out) co_return std::move(out).err();
  auto err = make_pipe();
  if (!err) co_return std::move(err).err();
  for (unique_fd* fd : {&out->read, &out->write, &err->read, &err->write})
    if (!lift_fd(*fd, 4)) co_return make_error(errc::unavailable, "out of descriptors: " + errno_text(errno));
  unique_fd secret;
  if (creds) {
    auto made = credential_fd(*creds);
    if (!made) co_return std::move(made).err();
    secret = std::move(*made);
    if (!lift_fd(secret, 4)) co_return make_error(errc::unavailable, "out of descriptors: " + errno_text(errno));
  }

  spawn_spec spec{prog.path, cmd.argv, merged_environment(cmd.env), cmd.cwd,
                  {{in.get(), 0}, {out->write.get(), 1}, {err->write.get(), 2}}};
  if (secret) spec.fds.push_back({secret.get(), credential_fd_number});
  child_guard child;
  int spawn_error = spawn_process(spec, child.pid);
  // Our copies go at once: the memfd now lives only in git and what it starts.
  secret.reset();
  in.reset();
  out->write.reset();
  err->write.reset();
  if (spawn_error == EAGAIN || spawn_error == ENOMEM)
    co_return make_error(errc::unavailable, "cannot start git: " + errno_text(spawn_error));
  if (spawn_error != 0) {
    child.pid = -1;
    co_return not_found("cannot execute " + prog.path + ": " + errno_text(spawn_error), started);
  }

  auto ex = co_await asio::this_coro::executor;
  capture out_capture(ex, std::move(out->read), options.max_output_bytes);
  capture err_capture(ex, std::move(err->read), options.max_output_bytes);
  auto notifier = exit_notifier(child.pid);
  if (!notifier) co_return std::move(notifier).err();  // child_guard kills and reaps it
  stream_descriptor exited(ex, notifier->release());

  bool timed_out = false;
  int code = 0;
  {
    using namespace asio::experimental::awaitable_operators;
    co_await (read_until_eof(out_capture) && read_until_eof(err_capture) &&
              supervise(child, exited, options.timeout, out_capture, err_capture, timed_out, code));
  }
  out_capture.drain_ready();
  err_capture.drain_ready();
  if (code < 0) co_return make_error(errc::internal, "cannot collect git's exit status: " + errno_text(errno));

  exec_result r;
  r.exit_code = timed_out ? 124 : code;
  r.timed_out = timed_out;
  r.truncated = out_capture.truncated || err_capture.truncated;
  r.stdout_data = std::move(out_capture.data);
  r.stderr_data = std::move(err_capture.data);
  r.duration = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - started);
  co_return r;
}

}  // namespace sandfort::agent::git
