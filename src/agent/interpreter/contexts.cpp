#include "interpreter/contexts.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>

#include "interpreter/kernels.hpp"
#include "process/async.hpp"
#include "process/child.hpp"
#include "process/private_files.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent::interpreter {
namespace {

namespace asio = boost::asio;
using asio::posix::stream_descriptor;
using nlohmann::json;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;
constexpr std::size_t read_chunk = 64 * 1024;
constexpr std::size_t startup_note_cap = 4096;  // stderr of a kernel that failed to start, kept for the error

limits configured;

bool shell_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

result<void> check_env(const std::map<std::string, std::string>& env, language lang) {
  for (const auto& [key, value] : env) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos ||
        value.find('\0') != std::string::npos)
      return invalid_argument("env: '" + key + "' is not a valid variable");
    if (lang == language::bash && !shell_name(key))
      return invalid_argument("env: '" + key + "' is not a name bash can export");
  }
  return {};
}

}  // namespace

std::string_view to_string(language l) {
  switch (l) {
    case language::python: return "python";
    case language::js: return "js";
    case language::bash: return "bash";
  }
  return "python";
}

result<language> parse_language(std::string_view name) {
  if (name == "python" || name == "python3") return language::python;
  if (name == "js" || name == "javascript" || name == "node") return language::js;
  if (name == "bash" || name == "sh") return language::bash;
  return invalid_argument("language must be one of python, js, bash");
}

void configure(const limits& l) { configured = l; }
const limits& current_limits() { return configured; }

// One run while it is in progress: where the kernel's output goes, and how much it has made.
struct execution {
  explicit execution(run_sink& s, const asio::any_io_executor& ex)
      : sink(s), stop_signal(ex, asio::steady_timer::time_point::max()) {}
  run_sink& sink;
  asio::steady_timer stop_signal;  // cancelled when the run must stop: output cap, sink failed
  std::size_t produced = 0;
  bool truncated = false;
  bool sink_failed = false;
  std::string carry[2];  // a UTF-8 sequence split between two reads, per stream

  // The part of `bytes` still within the cap; past it, the run is to be stopped.
  std::string_view admit(std::string_view bytes) {
    if (truncated) return {};
    if (produced + bytes.size() > configured.output_cap) {
      bytes = bytes.substr(0, configured.output_cap - produced);
      truncated = true;
      stop_signal.cancel();
    }
    produced += bytes.size();
    return bytes;
  }

  // Whether a result of n bytes still fits; one that does not is dropped and stops the run.
  bool admit_result(std::size_t n) {
    if (truncated) return false;
    if (produced + n > configured.output_cap) {
      truncated = true;
      stop_signal.cancel();
      return false;
    }
    produced += n;
    return true;
  }

  asio::awaitable<void> forward(output_stream which, std::string_view bytes) {
    std::string& held = carry[which == output_stream::out ? 0 : 1];
    std::string text = held + std::string(admit(bytes));
    std::size_t complete = truncated ? text.size() : complete_utf8_prefix(text);
    held = text.substr(complete);
    text.resize(complete);
    if (text.empty() || sink_failed) co_return;
    if (!co_await sink.output(which, text)) {
      sink_failed = true;
      stop_signal.cancel();
    }
  }

  asio::awaitable<void> flush_carries() {
    for (auto which : {output_stream::out, output_stream::err}) {
      std::string& held = carry[which == output_stream::out ? 0 : 1];
      if (held.empty() || sink_failed) continue;
      std::string text = std::exchange(held, {});
      if (!co_await sink.output(which, text)) sink_failed = true;
    }
  }
};

struct registry::kernel {
  explicit kernel(const asio::any_io_executor& ex) : requests(ex), events(ex), out(ex), err(ex), exit_fd(ex) {}
  kernel(const kernel&) = delete;
  kernel& operator=(const kernel&) = delete;
  // Only with the io_context going away while it runs: nothing may outlive the agent.
  ~kernel() {
    if (reaped || pid <= 0) return;
    kill_session(pid);
    agent::reap(pid);
  }

  pid_t pid = -1;
  language lang = language::python;
  stream_descriptor requests;  // python, js: fd 3; bash: its stdin
  stream_descriptor events;    // fd 4
  stream_descriptor out, err;  // fds 1 and 2
  stream_descriptor exit_fd;   // readable once it exited
  bool alive = true;
  bool reaped = false;
  int exit_status = 0;
  std::string why_killed;  // set when the agent killed it (restart, delete, timeout)
  bool ready = false;
  std::string startup_note;  // stderr before ready, for the error when it never gets there
  std::deque<json> pending;  // events read, not yet taken by a run
  std::size_t pending_bytes = 0;
  std::string line;
  bool overlong = false;  // skipping the rest of a line past the cap
  notifier changed;       // an event arrived or the kernel exited
  std::shared_ptr<execution> current;
};

struct registry::context {
  std::string id;
  language lang = language::python;
  std::string cwd;
  std::map<std::string, std::string> env;
  bool is_default = false;
  time_point created_at;
  std::string dir;
  std::shared_ptr<kernel> k;
  fifo_mutex lock;
  bool deleted = false;
  std::uint64_t count = 0;
};

namespace {

using kernel_t = registry::kernel;
using context_t = registry::context;

asio::awaitable<void> watch_exit(std::shared_ptr<kernel_t> k) {
  auto [ec] = co_await k->exit_fd.async_wait(stream_descriptor::wait_read, use_tuple);
  if (ec) co_return;  // the io_context is going away: ~kernel kills and reaps
  kill_session(k->pid);  // what it started goes with it, while its session's number is still held
  k->exit_status = agent::reap(k->pid);
  k->reaped = true;
  k->alive = false;
  k->changed.notify_all();
}

void take_line(kernel_t& k, std::string_view text) {
  if (k.pending_bytes + text.size() > configured.output_cap) return;  // nobody takes them: drop
  auto event = json::parse(text, nullptr, false);
  if (!event.is_object() || !event.contains("type") || !event["type"].is_string()) return;
  if (event["type"] == "ready") {
    k.ready = true;
  } else {
    k.pending_bytes += text.size();
    k.pending.push_back(std::move(event));
  }
  k.changed.notify_all();
}

// Event lines, each at most the output cap (a longer one is dropped whole).
asio::awaitable<void> read_events(std::shared_ptr<kernel_t> k) {
  std::vector<char> buf(read_chunk);
  while (true) {
    auto [ec, n] = co_await k->events.async_read_some(asio::buffer(buf), use_tuple);
    std::string_view got(buf.data(), n);
    while (!got.empty()) {
      auto nl = got.find('\n');
      std::string_view piece = got.substr(0, nl);
      if (!k->overlong) {
        k->line.append(piece);
        if (k->line.size() > configured.output_cap) {
          k->overlong = true;
          k->line.clear();
          if (k->current) k->current->truncated = true;
        }
      }
      if (nl == std::string_view::npos) break;
      if (!k->overlong) take_line(*k, k->line);
      k->line.clear();
      k->overlong = false;
      got.remove_prefix(nl + 1);
    }
    if (ec) co_return;
  }
}

// Output is passed to the run in progress; between runs (a background thread printing) it is
// read and dropped, so the kernel never blocks on a full pipe.
asio::awaitable<void> pump(std::shared_ptr<kernel_t> k, output_stream which) {
  std::vector<char> buf(read_chunk);
  auto& pipe = which == output_stream::out ? k->out : k->err;
  while (true) {
    auto [ec, n] = co_await pipe.async_read_some(asio::buffer(buf), use_tuple);
    std::string_view got(buf.data(), n);
    if (!k->ready && which == output_stream::err && k->startup_note.size() < startup_note_cap)
      k->startup_note.append(got.substr(0, startup_note_cap - k->startup_note.size()));
    if (auto run = k->current; run && n > 0) co_await run->forward(which, got);
    if (ec) co_return;
  }
}

// What is in the output pipes now, passed on before an event (the kernel flushed it first).
asio::awaitable<void> drain_output(kernel_t& k, execution& run) {
  std::vector<char> buf(read_chunk);
  for (auto which : {output_stream::out, output_stream::err}) {
    auto& pipe = which == output_stream::out ? k.out : k.err;
    int pending = 0;
    if (::ioctl(pipe.native_handle(), FIONREAD, &pending) != 0) continue;
    while (pending > 0) {
      ssize_t n = ::read(pipe.native_handle(), buf.data(), std::min(buf.size(), static_cast<std::size_t>(pending)));
      if (n <= 0) break;
      co_await run.forward(which, std::string_view(buf.data(), static_cast<std::size_t>(n)));
      pending -= static_cast<int>(n);
    }
  }
}

struct program_choice {
  std::string path;
  std::vector<std::string> argv;
};

result<program_choice> choose_program(language lang, const std::string& dir, const context_t& c) {
  const char* name = lang == language::python ? "python3" : lang == language::js ? "node" : "bash";
  auto found = resolve_program(name, search_path(c.env), c.cwd);
  if (found.path.empty())
    return make_error(errc::conflict, std::string(name) + " is not installed in this sandbox: a " +
                                          std::string(to_string(lang)) +
                                          " context needs it (the code-interpreter image has python3 and node)");
  if (lang == language::bash) return program_choice{found.path, {"bash", "--noprofile", "--norc"}};
  std::string file = dir + (lang == language::python ? "/kernel.py" : "/kernel.js");
  auto source = lang == language::python ? python_kernel() : js_kernel();
  if (!write_new_file(file, source))
    return make_error(errc::unavailable, "cannot write " + file + ": " + errno_text(errno));
  return program_choice{found.path, {name, file}};
}

result<std::shared_ptr<kernel_t>> spawn_kernel(const asio::any_io_executor& ex, const std::string& dir,
                                               const context_t& c) {
  auto program = choose_program(c.lang, dir, c);
  if (!program) return std::move(program).err();
  auto requests = make_pipe();
  if (!requests) return std::move(requests).err();
  auto events = make_pipe();
  if (!events) return std::move(events).err();
  auto out = make_pipe();
  if (!out) return std::move(out).err();
  auto err = make_pipe();
  if (!err) return std::move(err).err();
  unique_fd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (devnull.get() < 0 || !lift_fd(devnull, 10) || !lift_fd(requests->read, 10) || !lift_fd(events->write, 10) ||
      !lift_fd(out->write, 10) || !lift_fd(err->write, 10))
    return make_error(errc::unavailable, "cannot prepare a kernel's descriptors: " + errno_text(errno));
  const bool bash = c.lang == language::bash;
  spawn_spec spec{program->path, program->argv, merged_environment(c.env), c.cwd,
                  {{bash ? requests->read.get() : devnull.get(), 0},
                   {out->write.get(), 1},
                   {err->write.get(), 2},
                   {bash ? devnull.get() : requests->read.get(), 3},
                   {events->write.get(), 4}}};
  pid_t pid = -1;
  if (int e = spawn_process(spec, pid); e != 0)
    return make_error(errc::unavailable, "cannot start " + program->path + ": " + errno_text(e));
  auto k = std::make_shared<kernel_t>(ex);
  k->pid = pid;  // from here on, ~kernel kills and reaps it on any failure
  k->lang = c.lang;
  auto notifier = exit_notifier(pid);
  if (!notifier) return std::move(notifier).err();
  k->exit_fd.assign(notifier->release());
  k->requests.assign(requests->write.release());
  k->requests.non_blocking(true);
  k->events.assign(events->read.release());
  k->out.assign(out->read.release());
  k->err.assign(err->read.release());
  if (bash) {
    // SIGINT returns from the sourced run (the shell and its state stay); then say ready.
    std::string setup = "trap 'return 130 2>/dev/null' INT; builtin printf '{\"type\":\"ready\"}\\n' >&4\n";
    if (::write(k->requests.native_handle(), setup.data(), setup.size()) != static_cast<ssize_t>(setup.size()))
      return make_error(errc::unavailable, "cannot talk to bash: " + errno_text(errno));
  }
  asio::co_spawn(ex, watch_exit(k), asio::detached);
  asio::co_spawn(ex, read_events(k), asio::detached);
  asio::co_spawn(ex, pump(k, output_stream::out), asio::detached);
  asio::co_spawn(ex, pump(k, output_stream::err), asio::detached);
  return k;
}

// The kernel's ready event, within the start timeout.
asio::awaitable<result<void>> await_ready(kernel_t& k, language lang) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer deadline(k.events.get_executor(), configured.start_timeout);
  while (!k.ready && k.alive) {
    auto seen = k.changed.version();
    auto which = co_await (k.changed.wait(seen) || deadline.async_wait(use_tuple));
    if (which.index() == 1) {
      k.why_killed = "did not start";
      kill_session(k.pid);
      co_return make_error(errc::unavailable, "the " + std::string(to_string(lang)) + " interpreter did not start within " +
                                                  std::to_string(configured.start_timeout.count() / 1000) + " s");
    }
  }
  if (k.ready) co_return ok_t{};
  std::string note = k.startup_note.empty() ? "" : ": " + k.startup_note;
  co_return make_error(errc::unavailable, "the " + std::string(to_string(lang)) + " interpreter exited at start (status " +
                                              std::to_string(k.exit_status) + ")" + note);
}

// The dead interpreter, as the run that was in it hears of it.
json lost_error(const kernel_t& k, const context_t& c) {
  std::string why = !k.why_killed.empty()
                        ? "the context was " + k.why_killed
                        : "the " + std::string(to_string(c.lang)) + " process exited (status " + std::to_string(k.exit_status) + ")";
  return {{"name", "ContextRestarted"},
          {"value", why + "; its state is lost and its next run starts afresh"},
          {"traceback", ""}};
}

std::string env_prefix(const std::map<std::string, std::string>& env, std::string& restore) {
  std::string set;
  int i = 0;
  for (const auto& [key, value] : env) {
    std::string flag = "__sandfort_e" + std::to_string(i), saved = "__sandfort_v" + std::to_string(i);
    set += flag + "=${" + key + "+x} " + saved + "=${" + key + "-}; export " + key + "=" + shell_quote(value) + "; ";
    restore += "if [ -n \"$" + flag + "\" ]; then " + key + "=$" + saved + "; else unset " + key + "; fi; unset " + flag +
               " " + saved + "; ";
    ++i;
  }
  return set;
}

// The request line a kernel reads for one run.
result<std::string> request_line(const context_t& c, const run_params& p) {
  if (c.lang != language::bash) return json{{"code", p.code}, {"env", p.env}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::string cell = c.dir + "/cell";
  if (!write_new_file(cell, p.code)) return make_error(errc::unavailable, "cannot write " + cell + ": " + errno_text(errno));
  std::string restore;
  std::string prefix = env_prefix(p.env, restore);
  return "{ " + prefix + ". " + shell_quote(cell) + "; } </dev/null 4>&-; __sandfort_s=$?; " + restore +
         "builtin printf '{\"type\":\"done\",\"status\":%d}\\n' \"$__sandfort_s\" >&4\n";
}

constexpr std::string_view error_event = "error";
const std::string not_stopped_note = "; it did not stop, so the context was restarted (its state is lost)";

json exit_status_error(int status) {
  return {{"name", "ExitError"}, {"value", "exit status " + std::to_string(status)}, {"traceback", ""}};
}

enum class stop_reason { none, timeout, output_cap, receiver_gone };

json stop_error(stop_reason why, milliseconds timeout, const std::string& traceback) {
  if (why == stop_reason::output_cap)
    return {{"name", "OutputLimitExceeded"},
            {"value", "the run's output passed " + std::to_string(configured.output_cap) + " bytes; the rest was dropped and the run interrupted"},
            {"traceback", traceback}};
  return {{"name", "TimeoutError"},
          {"value", "the run took longer than " + std::to_string(timeout.count()) + " ms and was interrupted"},
          {"traceback", traceback}};
}

asio::awaitable<void> receiver_gone(run_sink& sink, execution& run) {
  using namespace asio::experimental::awaitable_operators;
  co_await (sink.wait_gone() || run.stop_signal.async_wait(use_tuple));
}

// One run in a started kernel, from the request line to its done event (or the kernel's end).
asio::awaitable<run_outcome> drive(context_t& c, std::shared_ptr<kernel_t> k, const run_params& p, run_sink& sink,
                                   const std::string& line) {
  using namespace asio::experimental::awaitable_operators;
  auto ex = co_await asio::this_coro::executor;
  auto started = steady::now();
  auto run = std::make_shared<execution>(sink, ex);
  k->pending.clear();
  k->pending_bytes = 0;
  k->current = run;
  run_outcome outcome;
  outcome.context_id = c.id;
  outcome.execution_count = ++c.count;
  co_await asio::async_write(k->requests, asio::buffer(line), use_tuple);  // a dead kernel shows below

  const milliseconds timeout = p.timeout.count() > 0 ? p.timeout : configured.default_timeout;
  asio::steady_timer deadline(ex, timeout);
  stop_reason stopped = stop_reason::none;
  bool finished = false;
  json interrupted_error;  // the kernel's own error after our interrupt: its traceback is kept
  while (!finished) {
    while (!k->pending.empty() && !finished) {
      json event = std::move(k->pending.front());
      k->pending.pop_front();
      co_await drain_output(*k, *run);
      std::string type = event["type"].get<std::string>();
      event.erase("type");
      if (type == "done") {
        finished = true;
        int status = event.value("status", 0);
        if (c.lang == language::bash && status != 0 && stopped == stop_reason::none && !run->sink_failed) {
          json exit_error = exit_status_error(status);
          bool sent = co_await sink.event(error_event, exit_error);
          run->sink_failed = !sent;
        }
      } else if (type == "error" && stopped != stop_reason::none) {
        interrupted_error = std::move(event);
      } else if ((type == "result" || type == "error") && !run->sink_failed) {
        if (type == "result") {
          if (!run->admit_result(event.dump().size())) continue;  // past the cap: dropped
        }
        if (!co_await sink.event(type, event)) {
          run->sink_failed = true;
          run->stop_signal.cancel();
        }
      }
    }
    if (finished || !k->alive) break;
    // Something to stop it for, not yet acted on: interrupt, then give it the grace period.
    if (stopped == stop_reason::none && (run->truncated || run->sink_failed)) {
      stopped = run->truncated ? stop_reason::output_cap : stop_reason::receiver_gone;
      ::kill(-k->pid, SIGINT);
      deadline.expires_after(configured.interrupt_grace);
      continue;
    }
    auto seen = k->changed.version();
    if (!k->pending.empty()) continue;
    auto which = co_await (k->changed.wait(seen) || deadline.async_wait(use_tuple) || receiver_gone(sink, *run));
    if (which.index() == 1) {
      if (stopped != stop_reason::none) {  // it did not come back from the interrupt
        k->why_killed = "killed because its run did not stop when interrupted";
        kill_session(k->pid);
        while (k->alive) co_await k->changed.wait();
        break;
      }
      stopped = stop_reason::timeout;
      outcome.timed_out = true;
      ::kill(-k->pid, SIGINT);
      deadline.expires_after(configured.interrupt_grace);
    } else if (which.index() == 2) {
      if (!run->truncated) run->sink_failed = true;
    }
  }
  if (stopped == stop_reason::receiver_gone || run->sink_failed) outcome.abandoned = true;
  co_await drain_output(*k, *run);
  co_await run->flush_carries();
  k->current.reset();
  if (!outcome.abandoned) {
    std::string traceback = interrupted_error.is_object() ? interrupted_error.value("traceback", std::string()) : "";
    if (!k->alive && !finished) {
      outcome.restarted = true;
      json lost = stopped == stop_reason::none ? lost_error(*k, c) : stop_error(stopped, timeout, traceback);
      if (stopped != stop_reason::none) lost["value"] = lost["value"].get<std::string>() + not_stopped_note;
      co_await sink.event(error_event, lost);
    } else if (stopped == stop_reason::timeout || stopped == stop_reason::output_cap) {
      json stop = stop_error(stopped, timeout, traceback);
      co_await sink.event(error_event, stop);
    }
  }
  if (!k->alive) outcome.restarted = true;
  outcome.truncated = run->truncated;
  outcome.duration = std::chrono::duration_cast<milliseconds>(steady::now() - started);
  co_return outcome;
}

// The context's directory (and the registry's) should someone have removed them.
result<void> ensure_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(errc::unavailable, "cannot create " + dir + ": " + ec.message());
  return {};
}

asio::awaitable<result<std::shared_ptr<kernel_t>>> start(context_t& c) {
  auto ex = co_await asio::this_coro::executor;
  if (auto d = ensure_dir(c.dir); !d) co_return std::move(d).err();
  auto k = spawn_kernel(ex, c.dir, c);
  if (!k) co_return std::move(k).err();
  if (auto ready = co_await await_ready(**k, c.lang); !ready) co_return std::move(ready).err();
  c.k = *k;
  c.count = 0;
  co_return std::move(*k);
}

context_info info_of(const context_t& c) {
  context_info i;
  i.id = c.id;
  i.lang = c.lang;
  i.cwd = c.cwd;
  i.is_default = c.is_default;
  i.created_at = c.created_at;
  if (c.k && c.k->alive) i.pid = c.k->pid;
  i.busy = c.lock.locked();
  i.execution_count = c.count;
  return i;
}

void stop_kernel(context_t& c, const std::string& why) {
  if (!c.k || !c.k->alive) return;
  c.k->why_killed = why;
  kill_session(c.k->pid);  // the watcher reaps it
}

}  // namespace

registry::registry(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}

registry::~registry() {
  contexts_.clear();
  if (!root_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
}

void registry::shutdown() { contexts_.clear(); }

registry& registry::of(const asio::any_io_executor& ex) {
  return asio::use_service<registry>(asio::query(ex, asio::execution::context));
}

result<std::string> registry::root_dir() {
  if (root_.empty()) {
    auto made = make_private_dir(configured.runtime_dir, ".sandfort-code-");
    if (!made) return std::move(made).err();
    root_ = std::move(*made);
  }
  return root_;
}

std::shared_ptr<registry::context> registry::find(const std::string& wanted) const {
  for (const auto& c : contexts_)
    if (c->id == wanted) return c;
  return nullptr;
}

result<std::shared_ptr<registry::context>> registry::make_context(const create_params& params, bool is_default) {
  if (contexts_.size() >= configured.max_contexts)
    return make_error(errc::conflict, "too many code contexts (" + std::to_string(configured.max_contexts) +
                                          "): delete one first");
  if (auto env = check_env(params.env, params.lang); !env) return std::move(env).err();
  std::string cwd = params.cwd;
  if (cwd.empty()) {
    std::error_code ec;
    cwd = std::filesystem::current_path(ec).string();
    if (ec) cwd = "/";
  }
  if (cwd.front() != '/' || cwd.find('\0') != std::string::npos)
    return invalid_argument("cwd must be an absolute path");
  struct stat st{};
  if (::stat(cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return invalid_argument("cwd " + cwd + " is not a directory");
  auto root = root_dir();
  if (!root) return std::move(root).err();
  auto c = std::make_shared<context>();
  c->id = "ctx-" + random_hex(8);
  c->lang = params.lang;
  c->cwd = cwd;
  c->env = params.env;
  c->is_default = is_default;
  c->created_at = std::chrono::system_clock::now();
  c->dir = *root + "/" + c->id;
  return c;
}

asio::awaitable<result<context_info>> registry::create(const create_params& params) {
  auto made = make_context(params, false);
  if (!made) co_return std::move(made).err();
  auto c = *made;
  contexts_.push_back(c);  // counted at once: creates in flight cannot pass the limit together
  co_await c->lock.lock();
  fifo_lock held(c->lock);
  auto k = co_await start(*c);
  if (!k) {
    std::erase(contexts_, c);
    std::error_code ignored;
    std::filesystem::remove_all(c->dir, ignored);
    co_return std::move(k).err();
  }
  auto made_info = info_of(*c);
  made_info.busy = false;  // only this call held it
  co_return made_info;
}

std::vector<context_info> registry::list() const {
  std::vector<context_info> out;
  for (const auto& c : contexts_) out.push_back(info_of(*c));
  return out;
}

result<context_info> registry::get(const std::string& wanted) const {
  auto c = find(wanted);
  if (!c) return make_error(errc::not_found, "code context " + wanted + " not found");
  return info_of(*c);
}

result<void> registry::remove(const std::string& wanted) {
  auto c = find(wanted);
  if (!c) return make_error(errc::not_found, "code context " + wanted + " not found");
  c->deleted = true;
  stop_kernel(*c, "deleted");
  std::erase(contexts_, c);
  std::error_code ignored;
  std::filesystem::remove_all(c->dir, ignored);
  return {};
}

asio::awaitable<result<context_info>> registry::restart(const std::string& wanted) {
  auto c = find(wanted);
  if (!c) co_return make_error(errc::not_found, "code context " + wanted + " not found");
  stop_kernel(*c, "restarted");  // a run in progress ends now, with that said
  co_await c->lock.lock();
  fifo_lock held(c->lock);
  if (c->deleted) co_return make_error(errc::not_found, "code context " + wanted + " not found");
  if (c->k)
    while (c->k->alive) co_await c->k->changed.wait();
  c->k.reset();
  c->count = 0;
  auto k = co_await start(*c);
  if (!k) co_return std::move(k).err();
  auto fresh = info_of(*c);
  fresh.busy = false;  // only this call held it
  co_return fresh;
}

asio::awaitable<result<run_outcome>> registry::run(const run_params& params, run_sink& sink) {
  if (params.code.find('\0') != std::string::npos) co_return invalid_argument("code contains a NUL byte");
  if (params.timeout > configured.max_timeout)
    co_return invalid_argument("timeout_s must be no greater than " +
                               std::to_string(configured.max_timeout.count() / 1000));
  std::shared_ptr<context> c;
  if (!params.context_id.empty()) {
    c = find(params.context_id);
    if (!c) co_return make_error(errc::not_found, "code context " + params.context_id + " not found");
    if (params.lang && *params.lang != c->lang)
      co_return invalid_argument("context " + c->id + " runs " + std::string(to_string(c->lang)) + ", not " +
                                 std::string(to_string(*params.lang)));
  } else {
    language lang = params.lang.value_or(language::python);
    for (const auto& each : contexts_)
      if (each->is_default && each->lang == lang) c = each;
    if (!c) {
      auto made = make_context(create_params{lang, "", {}}, true);
      if (!made) co_return std::move(made).err();
      c = *made;
      contexts_.push_back(c);
    }
  }
  if (auto env = check_env(params.env, c->lang); !env) co_return std::move(env).err();

  co_await c->lock.lock();
  fifo_lock held(c->lock);
  if (c->deleted) co_return make_error(errc::not_found, "code context " + c->id + " not found");
  std::shared_ptr<kernel> k = c->k;
  if (!k || !k->alive) {
    auto started = co_await start(*c);
    if (!started) co_return std::move(started).err();
    k = *started;
  }
  if (auto d = ensure_dir(c->dir); !d) co_return std::move(d).err();
  auto line = request_line(*c, params);
  if (!line) co_return std::move(line).err();
  co_return co_await drive(*c, k, params, sink, *line);
}

}  // namespace sandfort::agent::interpreter
