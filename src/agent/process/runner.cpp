#include "process/runner.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <utility>

extern char** environ;

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;
using asio::posix::stream_descriptor;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr const char* default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr std::size_t read_chunk = 64 * 1024;  // the default pipe capacity

std::atomic<bool> pidfd_enabled{true};

std::string errno_text(int err) { return std::system_category().message(err); }

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct pipe_ends {
  unique_fd read;
  unique_fd write;
};

// Moves fd above 2 so that mapping pipe ends onto 0/1/2 in the child never clobbers another
// end (possible when the agent was started with a standard descriptor closed).
bool lift_above_stdio(unique_fd& fd) {
  if (fd.get() > 2) return true;
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return false;
  fd.reset(moved);
  return true;
}

result<pipe_ends> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return make_error(errc::unavailable, "cannot create a pipe: " + errno_text(errno));
  pipe_ends p{unique_fd(fds[0]), unique_fd(fds[1])};
  if (!lift_above_stdio(p.read) || !lift_above_stdio(p.write))
    return make_error(errc::unavailable, "cannot create a pipe: " + errno_text(errno));
  return p;
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

result<void> validate(const exec_request& req) {
  auto invalid = [](std::string message) { return make_error(errc::invalid_argument, std::move(message)); };
  if (req.argv.empty()) return invalid("argv must not be empty");
  if (req.argv[0].empty()) return invalid("argv[0] must not be empty");
  for (std::size_t i = 0; i < req.argv.size(); ++i)
    if (has_nul(req.argv[i])) return invalid("argv[" + std::to_string(i) + "] contains a NUL byte");
  for (const auto& [key, value] : req.env) {
    if (key.empty() || key.find('=') != std::string::npos || has_nul(key))
      return invalid("env key '" + key + "' is not a valid variable name (empty, or contains '=' or NUL)");
    if (has_nul(value)) return invalid("env value of '" + key + "' contains a NUL byte");
  }
  if (req.timeout <= milliseconds::zero()) return invalid("timeout must be positive");
  if (!req.cwd.empty()) {
    if (has_nul(req.cwd)) return invalid("cwd contains a NUL byte");
    struct stat st {};
    if (::stat(req.cwd.c_str(), &st) != 0) {
      int err = errno;
      if (err == ENOENT) return invalid("cwd '" + req.cwd + "' does not exist");
      if (err == ENOTDIR) return invalid("cwd '" + req.cwd + "' is not a directory");
      return invalid("cwd '" + req.cwd + "' is not accessible: " + errno_text(err));
    }
    if (!S_ISDIR(st.st_mode)) return invalid("cwd '" + req.cwd + "' is not a directory");
  }
  return {};
}

std::vector<std::string> merged_environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view e(*entry);
    if (overrides.count(std::string(e.substr(0, e.find('='))))) continue;
    out.emplace_back(e);
  }
  for (const auto& [key, value] : overrides) out.push_back(key + "=" + value);
  return out;
}

std::string search_path(const std::map<std::string, std::string>& overrides) {
  if (auto it = overrides.find("PATH"); it != overrides.end()) return it->second;
  const char* own = std::getenv("PATH");
  return own ? own : default_path;
}

struct program {
  std::string path;  // empty: not found, see error
  int error = 0;
};

// Like execvp's search, but in the child's PATH (execvp would use the agent's). Relative
// entries are relative to the child's cwd, which the child enters before it executes.
program resolve_program(const std::string& name, const std::string& path_var, const std::string& cwd) {
  if (name.find('/') != std::string::npos) return {name, 0};
  bool denied = false;
  std::size_t start = 0;
  while (true) {
    std::size_t colon = path_var.find(':', start);
    std::string dir = path_var.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    std::string probe = candidate.front() == '/' || cwd.empty() ? candidate : cwd + "/" + candidate;
    struct stat st {};
    if (::stat(probe.c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode) && ::access(probe.c_str(), X_OK) == 0) return {candidate, 0};
      denied = true;
    } else if (errno == EACCES) {
      denied = true;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return {"", denied ? EACCES : ENOENT};
}

std::chrono::milliseconds since(steady::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - start);
}

// The shell's convention: 126 found but not executable, 127 not found.
exec_result not_executable(const exec_request& req, const program& prog, int err, steady::time_point start) {
  exec_result r;
  r.exit_code = err == ENOENT || err == ENOTDIR ? 127 : 126;
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

class spawn_setup {
 public:
  spawn_setup() {
    ::posix_spawn_file_actions_init(&actions_);
    ::posix_spawnattr_init(&attr_);
  }
  ~spawn_setup() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attr_);
  }
  spawn_setup(const spawn_setup&) = delete;
  spawn_setup& operator=(const spawn_setup&) = delete;

  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

// posix_spawn (vfork semantics): when it returns, the child has its own session and process
// group and has executed, so a timeout can never race the setsid. Returns 0 or an errno.
int spawn(const std::string& path, const exec_request& req, const std::vector<std::string>& env, int in, int out,
          int err, pid_t& pid) {
  std::vector<char*> argv;
  for (const auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  spawn_setup s;
  ::posix_spawn_file_actions_adddup2(&s.actions_, in, 0);
  ::posix_spawn_file_actions_adddup2(&s.actions_, out, 1);
  ::posix_spawn_file_actions_adddup2(&s.actions_, err, 2);
  if (!req.cwd.empty()) ::posix_spawn_file_actions_addchdir_np(&s.actions_, req.cwd.c_str());
  ::posix_spawn_file_actions_addclosefrom_np(&s.actions_, 3);

  // The agent ignores SIGPIPE and handles SIGTERM; the child starts from the defaults.
  sigset_t all, none;
  ::sigfillset(&all);
  ::sigemptyset(&none);
  ::posix_spawnattr_setsigdefault(&s.attr_, &all);
  ::posix_spawnattr_setsigmask(&s.attr_, &none);
  ::posix_spawnattr_setflags(&s.attr_, static_cast<short>(POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF |
                                                          POSIX_SPAWN_SETSIGMASK));
  return ::posix_spawn(&pid, path.c_str(), &s.actions_, &s.attr_, argv.data(), envp.data());
}

// A descriptor that becomes readable when pid exits, without reaping it: a pidfd, or where
// the kernel or seccomp refuses pidfd_open, a pipe whose write end a thread closes once
// waitid(WNOWAIT) returns. Neither needs a SIGCHLD handler or polling.
result<unique_fd> exit_notifier(pid_t pid) {
  if (pidfd_enabled.load()) {
    long fd = ::syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) return unique_fd(static_cast<int>(fd));
    if (errno != ENOSYS && errno != EPERM)
      return make_error(errc::unavailable, "pidfd_open failed: " + errno_text(errno));
  }
  auto p = make_pipe();
  if (!p) return std::move(p).err();
  int write_end = p->write.release();
  try {
    std::thread([pid, write_end] {
      siginfo_t info{};
      while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
      }
      ::close(write_end);
    }).detach();
  } catch (const std::system_error& e) {
    ::close(write_end);
    return make_error(errc::unavailable, std::string("cannot start an exit watcher: ") + e.what());
  }
  return std::move(p->read);
}

pid_t session_of(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return -1;
  char buf[512];
  ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n <= 0) return -1;
  std::string_view stat(buf, static_cast<std::size_t>(n));
  // "pid (comm) state ppid pgrp session ...": comm may hold anything, so count from its end.
  auto close_paren = stat.rfind(')');
  if (close_paren == std::string_view::npos) return -1;
  std::string_view rest = stat.substr(close_paren + 1);
  for (int field = 0; field < 4; ++field) {
    auto space = rest.find_first_not_of(' ');
    if (space == std::string_view::npos) return -1;
    rest = rest.substr(space);
    if (field == 3) break;
    rest = rest.substr(std::min(rest.find(' '), rest.size()));
  }
  pid_t session = -1;
  std::from_chars(rest.data(), rest.data() + rest.size(), session);
  return session;
}

// What a timeout must not leave behind: the child, its process group, and the rest of its
// session (a shell with job control moves jobs into groups of their own). Called while the
// child is still unreaped, so its pid cannot have been reused for another group or session.
void kill_session(pid_t sid) {
  ::kill(-sid, SIGKILL);
  ::kill(sid, SIGKILL);
  DIR* proc = ::opendir("/proc");
  if (!proc) return;
  while (dirent* entry = ::readdir(proc)) {
    pid_t pid = 0;
    std::string_view name(entry->d_name);
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc{} || end != name.data() + name.size() || pid == sid) continue;
    if (session_of(pid) == sid) ::kill(pid, SIGKILL);
  }
  ::closedir(proc);
}

struct capture {
  capture(const asio::any_io_executor& ex, unique_fd fd, std::size_t limit) : stream(ex, fd.release()), cap(limit) {
    stream.non_blocking(true);
  }

  void append(const char* bytes, std::size_t n) {
    std::size_t room = cap - data.size();
    if (n > room) {
      truncated = true;
      n = room;
    }
    data.append(bytes, n);
  }

  void stop() {
    stopping = true;
    boost::system::error_code ignored;
    stream.cancel(ignored);
  }

  // Takes what the pipe already holds and nothing more: a background job that inherited the
  // pipe may keep it open (and even keep writing) long after the child is gone.
  void drain_ready() {
    int pending = 0;
    if (::ioctl(stream.native_handle(), FIONREAD, &pending) != 0) return;
    std::vector<char> buf(read_chunk);
    while (pending > 0) {
      ssize_t n = ::read(stream.native_handle(), buf.data(), std::min(buf.size(), static_cast<std::size_t>(pending)));
      if (n <= 0) break;
      append(buf.data(), static_cast<std::size_t>(n));
      pending -= static_cast<int>(n);
    }
  }

  stream_descriptor stream;
  std::string data;
  std::size_t cap;
  bool truncated = false;
  bool stopping = false;
};

// Keeps reading past the cap (discarding) so the child never blocks on a full pipe.
asio::awaitable<void> read_until_eof(capture& c) {
  std::vector<char> buf(read_chunk);
  while (!c.stopping) {
    auto [ec, n] = co_await c.stream.async_read_some(asio::buffer(buf), use_tuple);
    c.append(buf.data(), n);
    if (ec) break;
  }
}

struct execution {
  execution(const asio::any_io_executor& ex, pid_t child, unique_fd out, unique_fd err, std::size_t cap)
      : pid(child), exited(ex), stdout_capture(ex, std::move(out), cap), stderr_capture(ex, std::move(err), cap) {}
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
    siginfo_t info{};
    int rc = 0;
    do {
      rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED);
    } while (rc != 0 && errno == EINTR);
    reaped = true;
    if (rc != 0) {
      reap_error = errno;
      return;
    }
    exit_code = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  }

  void stop_io() {
    stdout_capture.stop();
    stderr_capture.stop();
    boost::system::error_code ignored;
    if (stdin_pipe && stdin_pipe->is_open()) stdin_pipe->close(ignored);
  }

  pid_t pid;
  stream_descriptor exited;
  capture stdout_capture;
  capture stderr_capture;
  std::optional<stream_descriptor> stdin_pipe;
  bool reaped = false;
  int reap_error = 0;
  int exit_code = 0;
  bool timed_out = false;
};

asio::awaitable<void> feed_stdin(execution& x, const std::optional<std::string>& data) {
  if (!x.stdin_pipe || !data) co_return;
  // EPIPE when the child closes stdin early is its business, not an error of the call.
  co_await asio::async_write(*x.stdin_pipe, asio::buffer(*data), use_tuple);
  boost::system::error_code ignored;
  if (x.stdin_pipe->is_open()) x.stdin_pipe->close(ignored);
}

asio::awaitable<void> supervise(execution& x, milliseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(x.exited.get_executor(), timeout);
  auto first = co_await (x.exited.async_wait(stream_descriptor::wait_read, use_tuple) || timer.async_wait(use_tuple));
  if (first.index() == 0 && std::get<0>(std::get<0>(first))) {
    x.stop_io();  // cancelled: run() gives up, and ~execution kills and reaps the child
    co_return;
  }
  if (first.index() == 1) {
    kill_session(x.pid);
    x.timed_out = true;
    co_await x.exited.async_wait(stream_descriptor::wait_read, use_tuple);
  }
  x.reap();
  // The child is gone; whatever still holds the pipes is a background job we do not wait for.
  x.stop_io();
}

}  // namespace

namespace detail {
void use_pidfd(bool enabled) { pidfd_enabled.store(enabled); }
}  // namespace detail

asio::awaitable<result<exec_result>> run(exec_request req) {
  if (auto valid = validate(req); !valid) co_return std::move(valid).err();
  auto env = merged_environment(req.env);
  auto prog = resolve_program(req.argv[0], search_path(req.env), req.cwd);
  auto started = steady::now();
  if (prog.path.empty()) co_return not_executable(req, prog, prog.error, started);

  auto in = make_pipe();
  if (!in) co_return std::move(in).err();
  auto out = make_pipe();
  if (!out) co_return std::move(out).err();
  auto err = make_pipe();
  if (!err) co_return std::move(err).err();

  pid_t pid = -1;
  int spawn_error = spawn(prog.path, req, env, in->read.get(), out->write.get(), err->write.get(), pid);
  if (spawn_error == EAGAIN || spawn_error == ENOMEM)
    co_return make_error(errc::unavailable, "cannot start " + req.argv[0] + ": " + errno_text(spawn_error));
  if (spawn_error != 0) co_return not_executable(req, prog, spawn_error, started);
  in->read.reset();
  out->write.reset();
  err->write.reset();

  auto ex = co_await asio::this_coro::executor;
  execution x(ex, pid, std::move(out->read), std::move(err->read), req.max_output_bytes);
  auto notifier = exit_notifier(pid);
  if (!notifier) co_return std::move(notifier).err();  // x's destructor kills and reaps the child
  x.exited.assign(notifier->release());
  if (req.stdin_data) {
    x.stdin_pipe.emplace(ex, in->write.release());
    x.stdin_pipe->non_blocking(true);
  } else {
    in->write.reset();  // the child reads EOF
  }

  {
    using namespace asio::experimental::awaitable_operators;
    co_await (read_until_eof(x.stdout_capture) && read_until_eof(x.stderr_capture) &&
              feed_stdin(x, req.stdin_data) && supervise(x, req.timeout));
  }
  if (!x.reaped) co_return make_error(errc::unavailable, "the exec of " + req.argv[0] + " was cancelled");
  x.stdout_capture.drain_ready();
  x.stderr_capture.drain_ready();
  if (x.reap_error)
    co_return make_error(errc::internal, "cannot collect the exit status of " + req.argv[0] + ": " +
                                             errno_text(x.reap_error));

  exec_result r;
  r.duration = since(started);
  r.timed_out = x.timed_out;
  r.exit_code = x.timed_out ? 124 : x.exit_code;
  r.truncated = x.stdout_capture.truncated || x.stderr_capture.truncated;
  r.stdout_data = std::move(x.stdout_capture.data);
  r.stderr_data = std::move(x.stderr_capture.data);
  co_return r;
}

}  // namespace sandfort::agent
