#include "session/session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "process/async.hpp"
#include "process/child.hpp"
#include "process/private_files.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent::sessions {
namespace {

namespace asio = boost::asio;
using asio::posix::stream_descriptor;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

limits configured;

// Reads and drops everything until the last writer (a background job) closes the FIFO, so
// that the job never blocks on a full pipe nor dies of SIGPIPE.
asio::awaitable<void> discard_until_eof(std::shared_ptr<stream_descriptor> fifo) {
  auto buf = pipe_read_buffer();
  while (true) {
    auto [ec, n] = co_await fifo->async_read_some(asio::buffer(buf.get(), pipe_read_chunk), use_tuple);
    if (ec) break;
  }
}

}  // namespace

void configure(const limits& l) { configured = l; }
const limits& current_limits() { return configured; }

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

struct registry::shell {
  explicit shell(const asio::any_io_executor& ex) : input(ex), status(ex), exit_fd(ex) {}
  shell(const shell&) = delete;
  shell& operator=(const shell&) = delete;
  // Only with the io_context going away while the shell runs: nothing may outlive the agent.
  ~shell() {
    if (reaped || pid <= 0) return;
    kill_session(pid);
    agent::reap(pid);
  }

  pid_t pid = -1;
  bool is_bash = true;
  stream_descriptor input;    // the shell's stdin: one line per command
  stream_descriptor status;   // the shell's fd 3: one line per finished command
  stream_descriptor exit_fd;  // readable once the shell exited
  std::string status_buf;
  bool alive = true;
  bool reaped = false;
  int exit_status = 0;
  bool loss_reported = false;  // a caller was told it is gone, or asked for it
  notifier exited;
};

// One of a command's two output FIFOs. Kept from command to command while no background job
// holds it open; otherwise handed to a drainer and replaced.
struct output_fifo {
  std::string path;
  std::shared_ptr<stream_descriptor> reader;
  unique_fd keeper;  // our own write end while a command runs: no EOF before the status
};

struct registry::session {
  session(std::string n, std::string d)
      : name(std::move(n)), created_at(std::chrono::system_clock::now()), dir(std::move(d)) {
    out.path = dir + "/o";
    err.path = dir + "/e";
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() {
    out.reader.reset();
    err.reader.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }

  std::string name;
  time_point created_at;
  std::string dir;
  std::shared_ptr<shell> sh;
  fifo_mutex lock;
  bool deleted = false;
  output_fifo out;
  output_fifo err;
};

namespace {

using shell_t = registry::shell;
using session_t = registry::session;

asio::awaitable<void> watch_shell(std::shared_ptr<shell_t> sh) {
  auto [ec] = co_await sh->exit_fd.async_wait(stream_descriptor::wait_read, use_tuple);
  if (ec) co_return;  // the io_context is going away: ~shell kills and reaps
  // Its jobs go with it (a fresh shell starts clean), killed while the unreaped shell still
  // holds its session's number.
  kill_session(sh->pid);
  sh->exit_status = agent::reap(sh->pid);
  sh->reaped = true;
  sh->alive = false;
  sh->exited.notify_all();
}

result<std::shared_ptr<shell_t>> start_shell(const asio::any_io_executor& ex) {
  const limits& lim = configured;
  std::string path = lim.shell;
  if (path.empty()) {
    auto bash = resolve_program("bash", search_path({}), "");
    path = bash.path.empty() ? "/bin/sh" : bash.path;
  }
  std::string base = path.substr(path.rfind('/') + 1);
  bool is_bash = base.find("bash") != std::string::npos;
  std::vector<std::string> argv = {base};
  if (is_bash) argv.insert(argv.end(), {"--noprofile", "--norc"});

  auto in = make_pipe();
  if (!in) return std::move(in).err();
  auto status = make_pipe();
  if (!status) return std::move(status).err();
  unique_fd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (devnull.get() < 0 || !lift_fd(devnull, 10) || !lift_fd(status->write, 10))
    return make_error(errc::unavailable, "cannot prepare a shell's descriptors: " + errno_text(errno));

  spawn_spec spec{path, argv, merged_environment({}), "",
                  {{in->read.get(), 0}, {devnull.get(), 1}, {devnull.get(), 2}, {status->write.get(), 3}}};
  pid_t pid = -1;
  if (int e = spawn_process(spec, pid); e != 0)
    return make_error(errc::unavailable, "cannot start the session shell " + path + ": " + errno_text(e));

  auto sh = std::make_shared<shell_t>(ex);
  sh->pid = pid;  // from here on, ~shell kills and reaps it on any failure
  sh->is_bash = is_bash;
  auto notifier = exit_notifier(pid);
  if (!notifier) return std::move(notifier).err();
  sh->exit_fd.assign(notifier->release());
  sh->input.assign(in->write.release());
  sh->input.non_blocking(true);
  sh->status.assign(status->read.release());
  sh->status.non_blocking(true);

  // Job control gives every job its own process group; SIGUSR2 makes a running command
  // return (see the header). The pipe is empty, so this short write cannot block.
  // Bash's trap returns from whatever the signal interrupted except the wrapper (session.hpp):
  // there, it lets the wrapper report the status.
  std::string setup = is_bash ? "set -m; shopt -s expand_aliases; "
                                "trap 'case ${BASH_SOURCE-} in */.sandfort-*/wrap) ;; *) return 124 2>/dev/null;; esac' USR2\n"
                              : "set -m 2>/dev/null; trap 'return 124 2>/dev/null' USR2\n";
  if (::write(sh->input.native_handle(), setup.data(), setup.size()) != static_cast<ssize_t>(setup.size()))
    return make_error(errc::unavailable, "cannot talk to the session shell: " + errno_text(errno));
  asio::co_spawn(ex, watch_shell(sh), asio::detached);
  return sh;
}

// The session's directory, and its parent (ours too) should someone have removed them.
result<void> ensure_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) return {};
  if (errno == ENOENT) {
    std::string parent = dir.substr(0, dir.rfind('/'));
    if ((::mkdir(parent.c_str(), 0700) == 0 || errno == EEXIST) && ::mkdir(dir.c_str(), 0700) == 0) return {};
  }
  return make_error(errc::unavailable, "cannot create " + dir + ": " + errno_text(errno));
}

// Makes the FIFO ready for a command: a read end (new if needed) and our keeper write end.
result<void> prepare(const asio::any_io_executor& ex, output_fifo& f) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!f.reader) {
      ::unlink(f.path.c_str());
      if (::mkfifo(f.path.c_str(), 0600) != 0)
        return make_error(errc::unavailable, "cannot create " + f.path + ": " + errno_text(errno));
      int fd = ::open(f.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) return make_error(errc::unavailable, "cannot open " + f.path + ": " + errno_text(errno));
      f.reader = std::make_shared<stream_descriptor>(ex, fd);
    }
    f.keeper.reset(::open(f.path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    if (f.keeper.get() >= 0) return {};
    f.reader.reset();  // removed behind our back: make it again
  }
  return make_error(errc::unavailable, "cannot open " + f.path + ": " + errno_text(errno));
}

// After the command: keep the FIFO when nobody else has it open, else drain it in the
// background (a job inherited it) and make a fresh one next time.
void release(const asio::any_io_executor& ex, output_fifo& f) {
  f.keeper.reset();
  if (!f.reader) return;
  char probe[4096];
  ssize_t n = ::read(f.reader->native_handle(), probe, sizeof probe);
  if (n == 0) return;
  ::unlink(f.path.c_str());
  asio::co_spawn(ex, discard_until_eof(std::move(f.reader)), asio::detached);
  f.reader.reset();
}

std::optional<std::size_t> status_line_end(const shell_t& sh) {
  auto nl = sh.status_buf.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  return nl;
}

// Completes once a whole status line is buffered (true) or the status pipe ended (false).
// The line stays buffered until take_status(): a wait that lost a race keeps nothing back.
asio::awaitable<bool> status_ready(shell_t& sh) {
  char buf[256];
  while (!status_line_end(sh)) {
    auto [ec, n] = co_await sh.status.async_read_some(asio::buffer(buf), use_tuple);
    sh.status_buf.append(buf, n);
    if (ec) co_return status_line_end(sh).has_value();
  }
  co_return true;
}

std::string take_status(shell_t& sh) {
  auto nl = status_line_end(sh).value_or(sh.status_buf.size());
  std::string line = sh.status_buf.substr(0, nl);
  sh.status_buf.erase(0, std::min(sh.status_buf.size(), nl + 1));
  return line;
}

asio::awaitable<void> shell_exited(shell_t& sh) {
  if (!sh.alive) co_return;
  co_await sh.exited.wait();
}

// One command in one shell.
struct command_run {
  command_run(const asio::any_io_executor& ex, session_t& s_, shell_t& sh_, const exec_params& p)
      : s(s_),
        sh(sh_),
        params(p),
        out(output_stream::out, configured.output_cap, p.sink),
        err(output_stream::err, configured.output_cap, p.sink),
        abort_signal(ex, asio::steady_timer::time_point::max()) {}

  session_t& s;
  shell_t& sh;
  const exec_params& params;
  output_collector out;
  output_collector err;
  asio::steady_timer abort_signal;  // cancelled when the streaming receiver fails
  std::vector<pid_t> children_before;
  bool stopping = false;
  int exit_code = 0;
  bool timed_out = false;
  bool abandoned = false;
  bool restarted = false;

  void stop_pumps() {
    stopping = true;
    boost::system::error_code ignored;
    if (s.out.reader) s.out.reader->cancel(ignored);
    if (s.err.reader) s.err.reader->cancel(ignored);
  }
};

asio::awaitable<void> pump(command_run& run, output_fifo& f, output_collector& c) {
  auto buf = pipe_read_buffer();
  auto reader = f.reader;
  while (!run.stopping) {
    auto [ec, n] = co_await reader->async_read_some(asio::buffer(buf.get(), pipe_read_chunk), use_tuple);
    std::string_view got(buf.get(), n);
    co_await c.add(got);
    if (c.sink_failed()) run.abort_signal.cancel();
    if (ec) break;
  }
}

asio::awaitable<void> drain_ready(output_fifo& f, output_collector& c) {
  if (!f.reader) co_return;
  int pending = 0;
  if (::ioctl(f.reader->native_handle(), FIONREAD, &pending) != 0 || pending <= 0) co_return;
  auto buf = pipe_read_buffer();
  while (pending > 0) {
    const std::size_t want = std::min(pipe_read_chunk, static_cast<std::size_t>(pending));
    ssize_t n = ::read(f.reader->native_handle(), buf.get(), want);
    if (n <= 0) break;
    std::string_view got(buf.get(), static_cast<std::size_t>(n));
    co_await c.add(got);
    pending -= static_cast<int>(n);
  }
}

asio::awaitable<void> receiver_gone(command_run& run) {
  using namespace asio::experimental::awaitable_operators;
  if (!run.params.sink) {
    co_await run.abort_signal.async_wait(use_tuple);
    co_return;
  }
  co_await (run.abort_signal.async_wait(use_tuple) || run.params.sink->wait_gone());
}

// What the command started that the shell did not have before: its jobs (process groups
// of their own under job control) and anything in the shell's own group (command
// substitutions).
void kill_new_jobs(const command_run& run) {
  for (pid_t child : children_of(run.sh.pid)) {
    if (std::find(run.children_before.begin(), run.children_before.end(), child) != run.children_before.end())
      continue;
    pid_t group = process_group_of(child);
    if (group > 1 && group != run.sh.pid) ::kill(-group, SIGKILL);
    kill_tree(child);
  }
}

asio::awaitable<void> send_line(shell_t& sh, const std::string& line) {
  // A dead shell shows as EPIPE here and as its exit right after: the caller waits for that.
  co_await asio::async_write(sh.input, asio::buffer(line), use_tuple);
}

// The shell did not come back: kill it (and its jobs) and wait until it is reaped.
asio::awaitable<void> replace_shell(command_run& run) {
  if (run.sh.alive) kill_session(run.sh.pid);
  co_await shell_exited(run.sh);
  run.restarted = true;
}

// Waits up to the grace period for a status line; false if the shell ended or did not answer.
asio::awaitable<bool> status_within_grace(command_run& run) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer grace(run.sh.status.get_executor(), configured.abort_grace);
  auto got = co_await (status_ready(run.sh) || shell_exited(run.sh) || grace.async_wait(use_tuple));
  co_return got.index() == 0 && std::get<0>(got);
}

// Timeout or a departed receiver: stop the command and get the shell back to its prompt.
asio::awaitable<void> abort_command(command_run& run) {
  ::kill(run.sh.pid, SIGUSR2);  // first, so the trap is pending when the job dies
  kill_new_jobs(run);
  if (!co_await status_within_grace(run)) {
    co_await replace_shell(run);
    co_return;
  }
  take_status(run.sh);
  // A SIGUSR2 that arrived after the command had finished is still pending in the shell: let
  // it fire at the top level (where its `return` fails harmlessly), not in the next command.
  std::string sync = run.sh.is_bash ? "builtin echo s >&3\n" : "echo s >&3\n";
  co_await send_line(run.sh, sync);
  if (!co_await status_within_grace(run)) {
    co_await replace_shell(run);
    co_return;
  }
  take_status(run.sh);
}

asio::awaitable<void> control(command_run& run, milliseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer deadline(run.sh.status.get_executor(), timeout);
  auto first =
      co_await (status_ready(run.sh) || shell_exited(run.sh) || deadline.async_wait(use_tuple) || receiver_gone(run));
  switch (first.index()) {
    case 0:
      if (std::get<0>(first)) {
        std::string line = take_status(run.sh);
        std::from_chars(line.data(), line.data() + line.size(), run.exit_code);
      } else {
        co_await replace_shell(run);  // its status pipe ended: the shell is unusable
        run.exit_code = run.sh.exit_status;
      }
      break;
    case 1:
      run.restarted = true;
      run.exit_code = run.sh.exit_status;
      break;
    default:
      (first.index() == 2 ? run.timed_out : run.abandoned) = true;
      co_await abort_command(run);
      run.exit_code = run.timed_out ? 124 : run.sh.exit_status;
      break;
  }
  run.stop_pumps();
}

// Bash sources the command by the name `bash` from the session's directory (session.hpp says
// why). Saved around the visit: the directory, OLDPWD, and the two options that change how `.`
// finds a name (sourcepath, posix).
std::string bash_source(const std::string& dir) {
  return "__sandfort_d=$PWD __sandfort_o=${OLDPWD-} __sandfort_f=${OLDPWD+o}; "
         "shopt -q sourcepath && __sandfort_f+=s; shopt -qo posix && __sandfort_f+=p && set +o posix; "
         "shopt -u sourcepath; builtin cd -- " +
         shell_quote(dir) + " && . bash";
}

// On the command's own first line, before its text, so that its line numbers stay its own.
// Posix mode first: bash changes sourcepath when it enters or leaves that mode.
const std::string bash_prologue =
    "builtin cd -- \"$__sandfort_d\" || builtin cd /; "
    "case $__sandfort_f in *o*) OLDPWD=$__sandfort_o;; *) builtin unset OLDPWD;; esac; "
    "case $__sandfort_f in *p*) set -o posix;; esac; "
    "case $__sandfort_f in *s*) shopt -s sourcepath;; *) shopt -u sourcepath;; esac; "
    "builtin unset __sandfort_d __sandfort_o __sandfort_f; ";

// What runs one command: sources it with the redirections around it, then reports its status.
std::string command_wrapper(const session_t& s, bool is_bash) {
  std::string source = is_bash ? bash_source(s.dir) : ". " + shell_quote(s.dir + "/c");
  return "{ " + source + "; } </dev/null >" + shell_quote(s.out.path) + " 2>" + shell_quote(s.err.path) +
         " 3>&-; " + (is_bash ? "builtin echo $? >&3" : "echo $? >&3");
}

// The line the shell reads for a command. Bash reads a pipe one byte per system call, so bash
// gets a short line that sources the wrapper from the file `wrap` (written when missing), not
// the wrapper itself (measured: reading the 344-byte wrapper took bash 57 µs, a short line 1.6).
result<std::string> command_line(session_t& s, bool is_bash) {
  if (!is_bash) return command_wrapper(s, false) + "\n";
  const std::string wrap = s.dir + "/wrap";
  if (::access(wrap.c_str(), F_OK) != 0 && !write_new_file(wrap, command_wrapper(s, true) + "\n"))
    return make_error(errc::unavailable, "cannot write " + wrap + ": " + errno_text(errno));
  return ". " + shell_quote(wrap) + "\n";
}

asio::awaitable<result<exec_outcome>> run_command(const asio::any_io_executor& ex, session_t& s, shell_t& sh,
                                                  const exec_params& params) {
  auto started = steady::now();
  if (auto d = ensure_dir(s.dir); !d) co_return std::move(d).err();
  std::string command_file = s.dir + (sh.is_bash ? "/bash" : "/c");
  if (!write_new_file(command_file, sh.is_bash ? bash_prologue + params.command : params.command))
    co_return make_error(errc::unavailable, "cannot write " + command_file + ": " + errno_text(errno));
  auto line = command_line(s, sh.is_bash);
  if (!line) co_return std::move(line).err();
  if (auto p = prepare(ex, s.out); !p) co_return std::move(p).err();
  if (auto p = prepare(ex, s.err); !p) co_return std::move(p).err();

  command_run run(ex, s, sh, params);
  run.children_before = children_of(sh.pid);
  co_await send_line(sh, *line);

  auto timeout = params.timeout.count() > 0 ? params.timeout : configured.default_timeout;
  {
    using namespace asio::experimental::awaitable_operators;
    co_await (pump(run, s.out, run.out) && pump(run, s.err, run.err) && control(run, timeout));
  }
  if (!run.abandoned) {
    co_await drain_ready(s.out, run.out);
    co_await drain_ready(s.err, run.err);
    co_await run.out.finish();
    co_await run.err.finish();
  }
  release(ex, s.out);
  release(ex, s.err);

  exec_outcome outcome;
  exec_result& r = outcome.result;
  r.exit_code = run.exit_code;
  r.timed_out = run.timed_out;
  r.abandoned = run.abandoned || run.out.sink_failed() || run.err.sink_failed();
  r.truncated = run.out.truncated() || run.err.truncated();
  r.stdout_data = std::move(run.out.data());
  r.stderr_data = std::move(run.err.data());
  r.duration = std::chrono::duration_cast<milliseconds>(steady::now() - started);
  outcome.session_restarted = run.restarted;
  co_return outcome;
}

}  // namespace

registry::registry(asio::execution_context& ctx) : asio::execution_context::service(ctx) {
  sessions_.push_back(std::make_shared<session>(default_session, ""));
}

registry::~registry() {
  sessions_.clear();
  if (!root_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
}

void registry::shutdown() { sessions_.clear(); }

registry& registry::of(const asio::any_io_executor& ex) {
  return asio::use_service<registry>(asio::query(ex, asio::execution::context));
}

result<std::string> registry::root_dir() {
  if (root_.empty()) {
    auto made = make_private_dir(configured.runtime_dir, ".sandfort-");
    if (!made) return std::move(made).err();
    root_ = std::move(*made);
  }
  return root_;
}

namespace {

session_info info_of(const session_t& s) {
  session_info i;
  i.name = s.name;
  i.created_at = s.created_at;
  if (s.sh && s.sh->alive) i.pid = s.sh->pid;
  i.busy = s.lock.locked();
  i.waiting = s.lock.waiting();
  return i;
}

}  // namespace

result<session_info> registry::create(const asio::any_io_executor& ex, const std::string& name) {
  if (!valid_name(name)) return make_error(errc::invalid_argument, "name must be 1-64 characters of [A-Za-z0-9_.-]");
  for (const auto& s : sessions_)
    if (s->name == name) return make_error(errc::conflict, "session " + name + " already exists");
  if (sessions_.size() >= configured.max_sessions)
    return make_error(errc::conflict, "too many sessions (" + std::to_string(configured.max_sessions) + ")");
  auto root = root_dir();
  if (!root) return std::move(root).err();
  auto s = std::make_shared<session>(name, *root + "/" + std::to_string(++next_index_));
  if (auto d = ensure_dir(s->dir); !d) return std::move(d).err();
  auto sh = start_shell(ex);
  if (!sh) return std::move(sh).err();
  s->sh = std::move(*sh);
  sessions_.push_back(s);
  return info_of(*s);
}

std::vector<session_info> registry::list() const {
  std::vector<session_info> out;
  for (const auto& s : sessions_) out.push_back(info_of(*s));
  return out;
}

bool registry::has(const std::string& name) const {
  return std::any_of(sessions_.begin(), sessions_.end(), [&](const auto& s) { return s->name == name; });
}

result<void> registry::remove(const std::string& name) {
  auto it = std::find_if(sessions_.begin(), sessions_.end(), [&](const auto& s) { return s->name == name; });
  if (it == sessions_.end()) return make_error(errc::not_found, "session " + name + " not found");
  auto s = *it;
  if (s->sh && s->sh->alive) {
    s->sh->loss_reported = true;  // asked for: the next call is not told its shell was lost
    kill_session(s->sh->pid);     // the watcher reaps it
  }
  if (name == default_session) {
    s->created_at = std::chrono::system_clock::now();
  } else {
    s->deleted = true;
    sessions_.erase(it);
  }
  return {};
}

asio::awaitable<result<exec_outcome>> registry::exec(const std::string& name, const exec_params& params) {
  if (params.command.empty()) co_return make_error(errc::invalid_argument, "command must not be empty");
  if (params.command.find('\0') != std::string::npos)
    co_return make_error(errc::invalid_argument, "command contains a NUL byte");
  auto it = std::find_if(sessions_.begin(), sessions_.end(), [&](const auto& s) { return s->name == name; });
  if (it == sessions_.end()) co_return make_error(errc::not_found, "session " + name + " not found");
  auto s = *it;

  co_await s->lock.lock();
  fifo_lock held(s->lock);
  if (s->deleted) co_return make_error(errc::not_found, "session " + name + " not found");
  if (params.sink && params.sink->gone_now())
    co_return make_error(errc::unavailable, "the caller left before the command started");

  auto ex = co_await asio::this_coro::executor;
  if (s->dir.empty()) {
    auto root = root_dir();
    if (!root) co_return std::move(root).err();
    s->dir = *root + "/" + std::to_string(++next_index_);
    s->out.path = s->dir + "/o";
    s->err.path = s->dir + "/e";
  }
  bool lost = false;
  if (!s->sh || !s->sh->alive) {
    lost = s->sh && !s->sh->loss_reported;
    if (auto d = ensure_dir(s->dir); !d) co_return std::move(d).err();
    auto sh = start_shell(ex);
    if (!sh) co_return std::move(sh).err();
    s->sh = std::move(*sh);
  }
  auto sh = s->sh;
  auto outcome = co_await run_command(ex, *s, *sh, params);
  if (outcome) {
    if (outcome->session_restarted) sh->loss_reported = true;
    outcome->session_restarted = outcome->session_restarted || lost;
  }
  co_return outcome;
}

}  // namespace sandfort::agent::sessions
