#pragma once
// Stateful code contexts: one long-lived interpreter per context (python3, node or bash), so
// that variables, imports, functions and the working directory carry over between runs, as in
// a notebook. No Jupyter: the agent speaks a small kernel protocol with the interpreter.
//
// The kernel protocol. A context's process gets five descriptors:
//   0  /dev/null (bash: the request pipe)      1, 2  stdout and stderr pipes, read as produced
//   3  the request pipe (python, js): one JSON line per run, {"code": "...", "env": {...}}
//   4  the event pipe: one JSON line per event, in order:
//        {"type":"ready"}                     once, when the kernel can take a run
//        {"type":"result", text, html, png…, is_main_result}   a value shown
//        {"type":"error", name, value, traceback}               the run raised
//        {"type":"done"}  (bash: {"type":"done","status":N})    the run is over
// The kernel flushes stdout and stderr before it writes an event, and the agent drains what is
// in the output pipes before it passes an event on, so output printed before a result arrives
// before it. The Python and JavaScript kernels (kernel.py, kernel.js beside this file) are
// carried in the agent's binary and written into a private directory of the sandbox when a
// context starts: any image with python3 or node gets a code interpreter, and the kernel always
// speaks this agent's protocol. The bash kernel is bash itself, fed one line per run as a
// session's shell is (session/session.hpp).
//
// A run that outlives its timeout (or whose caller left, or whose output passed the cap) is
// interrupted: SIGINT to the context's process group, which the kernels turn into an error and
// the end of the run; a kernel that does not come back within a grace period is killed with
// everything it started, and the context starts afresh (its state lost) on its next run.
// Knows nothing of HTTP.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution_context.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "process/output.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent::interpreter {

enum class language { python, js, bash };
std::string_view to_string(language l);
// "python" (or "python3"), "js" (or "javascript", "node"), "bash" (or "sh").
result<language> parse_language(std::string_view name);

struct limits {
  std::chrono::milliseconds default_timeout{300'000};
  std::chrono::milliseconds max_timeout{3'600'000};  // --max-timeout-s
  // Bytes of output and results one run may produce; beyond it the rest is dropped and the run
  // is interrupted (--output-cap).
  std::size_t output_cap = std::size_t{10} << 20;
  std::size_t max_contexts = 16;  // per sandbox, default contexts included
  std::chrono::milliseconds interrupt_grace{2'000};
  std::chrono::milliseconds start_timeout{30'000};  // for a kernel to say it is ready
  std::string runtime_dir;  // empty: a private directory under /dev/shm, /tmp or /run/sandfort
};

// Applies to contexts started afterwards (call before serving).
void configure(const limits& l);
const limits& current_limits();

struct context_info {
  std::string id;
  language lang = language::python;
  std::string cwd;
  bool is_default = false;  // the context a run that names only a language uses
  time_point created_at;
  std::optional<int> pid;  // the interpreter, while it runs
  bool busy = false;
  std::uint64_t execution_count = 0;  // runs since the context (re)started
};

struct create_params {
  language lang = language::python;
  std::string cwd;                         // empty: the agent's working directory
  std::map<std::string, std::string> env;  // over the agent's environment, for every run
};

// Where a run's events go, in order. False from a write: nobody listens; the run is
// interrupted at once.
class run_sink {
 public:
  virtual ~run_sink() = default;
  virtual boost::asio::awaitable<bool> output(output_stream which, std::string_view text) = 0;
  // "result" or "error", with the kernel's fields (type removed).
  virtual boost::asio::awaitable<bool> event(std::string_view name, const nlohmann::json& data) = 0;
  // Completes when the receiver is gone (never while it listens). Cancellable.
  virtual boost::asio::awaitable<void> wait_gone() = 0;
};

struct run_params {
  std::string context_id;             // empty: the default context of `lang`
  std::optional<language> lang;       // with a context id: must be the context's
  std::string code;
  std::map<std::string, std::string> env;  // for this run only
  std::chrono::milliseconds timeout{0};    // zero: the default
};

struct run_outcome {
  std::string context_id;
  std::uint64_t execution_count = 0;
  bool timed_out = false;
  bool truncated = false;   // output beyond the cap was dropped (and the run interrupted)
  bool restarted = false;   // the interpreter was lost: the context's next run starts afresh
  bool abandoned = false;   // the receiver left
  std::chrono::milliseconds duration{0};
};

// Per io_context (an Asio service): every interpreter dies with the context.
class registry : public boost::asio::execution_context::service {
 public:
  using key_type = registry;
  static inline boost::asio::execution_context::id id;

  explicit registry(boost::asio::execution_context& ctx);
  ~registry() override;
  static registry& of(const boost::asio::any_io_executor& ex);

  // Starts the interpreter and waits until it is ready. invalid_argument (cwd, env),
  // conflict (too many contexts; the interpreter is not installed), unavailable.
  boost::asio::awaitable<result<context_info>> create(const create_params& params);
  std::vector<context_info> list() const;
  result<context_info> get(const std::string& wanted) const;
  // Kills the interpreter and everything it started; a run in progress ends with an error.
  result<void> remove(const std::string& wanted);
  // A fresh interpreter (state and execution count reset), ready when this returns.
  boost::asio::awaitable<result<context_info>> restart(const std::string& wanted);
  // One run; runs in one context go one at a time, in arrival order. An error means nothing was
  // written to the sink: not_found (context), invalid_argument (code, env, language),
  // conflict/unavailable (the interpreter cannot start).
  boost::asio::awaitable<result<run_outcome>> run(const run_params& params, run_sink& sink);

  struct context;
  struct kernel;

 private:
  void shutdown() override;
  result<std::string> root_dir();
  std::shared_ptr<context> find(const std::string& wanted) const;
  result<std::shared_ptr<context>> make_context(const create_params& params, bool is_default);

  std::vector<std::shared_ptr<context>> contexts_;
  std::string root_;
};

}  // namespace sandfort::agent::interpreter
