#pragma once
// Persistent shells: one long-lived bash (sh where bash is missing) per named session, so
// that cwd, exported variables, functions, aliases and background jobs carry over between
// calls. Knows nothing of HTTP or JSON.
//
// How a command runs, without a fork of our own and without polling: the shell runs with
// job control (`set -m`: every job gets its own process group) and reads one line per command
// from a pipe on its stdin:
//     { . DIR/c; } </dev/null >DIR/o 2>DIR/e 3>&-; builtin echo $? >&3
// `c` holds the command text (sourcing keeps cd/export/functions, and `return` ends just the
// command). Bash sources it as `DIR/bash` by the name `bash` instead (from DIR, which the
// file's first line leaves at once), because bash names a sourced file's errors after the name
// it was given: "bash: line 1: cd: /nope: …" as `bash -c` says, not the path of the file.
// Bash reads a pipe one byte per system call, so it is sent only `. DIR/wrap`, and that file
// (written when missing) holds the line above.
// `o` and `e` are FIFOs whose read ends the agent holds, and fd 3 is a pipe that carries the status back: its line ends
// the command. A background job that keeps `o` or `e` open is harmless: the agent drains such
// a FIFO in the background until the job closes it and uses a fresh one for the next command.
// The shell exiting (seen through a pidfd) ends the command with its exit status, and the
// next call gets a fresh shell.
//
// A timeout (or a streaming client that left) kills the jobs the command started (children of
// the shell that were not there before it) and sends the shell SIGUSR2, whose trap returns
// from the sourced command, so builtin loops stop too and the shell keeps its state (in bash,
// not from `wrap` itself, so that the status is still reported). A shell
// that does not come back within a grace period is killed and replaced.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "process/output.hpp"
#include "process/runner.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent::sessions {

struct limits {
  std::chrono::milliseconds default_timeout{60'000};
  std::chrono::milliseconds max_timeout{3'600'000};  // --max-timeout-s
  std::size_t output_cap = std::size_t{10} << 20;    // per stream, --output-cap
  std::chrono::milliseconds abort_grace{2'000};      // for a killed command's shell to come back
  std::size_t max_sessions = 256;
  std::string runtime_dir;  // empty: a private directory under /dev/shm, /tmp or /run/sandfort
  std::string shell;        // empty: bash from PATH, else /bin/sh
};

// Applies to sessions started afterwards (call before serving).
void configure(const limits& l);
const limits& current_limits();

bool valid_name(const std::string& name);
inline constexpr const char* default_session = "default";

struct session_info {
  std::string name;
  time_point created_at;
  std::optional<int> pid;  // the running shell, if any
  bool busy = false;       // a command is running
  std::size_t waiting = 0;  // calls queued behind it
};

struct exec_params {
  std::string command;
  std::chrono::milliseconds timeout{0};  // zero: the default
  output_sink* sink = nullptr;           // streaming (see exec_request::sink)
};

struct exec_outcome {
  exec_result result;  // stdout/stderr empty when streamed
  // The shell that ran the command is gone (it exited, or had to be killed), or the one the
  // caller had before was lost without anyone being told: the next call has a fresh shell.
  bool session_restarted = false;
};

// Per io_context (an Asio service): every shell dies with the context.
class registry : public boost::asio::execution_context::service {
 public:
  using key_type = registry;
  static inline boost::asio::execution_context::id id;

  explicit registry(boost::asio::execution_context& ctx);
  ~registry() override;
  static registry& of(const boost::asio::any_io_executor& ex);

  // Starts the shell at once. invalid_argument (name), conflict (exists, too many),
  // unavailable (cannot start a shell).
  result<session_info> create(const boost::asio::any_io_executor& ex, const std::string& name);
  std::vector<session_info> list() const;
  bool has(const std::string& name) const;
  // Kills the shell and everything it started. `default` stays (fresh on next use).
  result<void> remove(const std::string& name);
  // Runs one command; calls to one session run one at a time, in arrival order.
  boost::asio::awaitable<result<exec_outcome>> exec(const std::string& name, const exec_params& params);

  struct session;
  struct shell;

 private:
  void shutdown() override;
  result<std::string> root_dir();

  std::vector<std::shared_ptr<session>> sessions_;
  std::string root_;
  unsigned next_index_ = 0;
};

}  // namespace sandfort::agent::sessions
