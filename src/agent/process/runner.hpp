#pragma once
// Runs one command to completion inside the sandbox: its own session and process group,
// stdout and stderr captured separately and concurrently, an optional stdin, a timeout that
// kills the whole group, and per-stream output caps. Knows nothing of HTTP or JSON.
//
// The process must ignore SIGPIPE (a child that closes its stdin early must not kill us) and
// must not ignore SIGCHLD (ignored SIGCHLD makes the kernel reap children before we can).

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::agent {

class output_sink;

struct exec_request {
  // argv[0] without a '/' is looked up in the PATH of the merged environment.
  std::vector<std::string> argv;
  std::string cwd;                          // empty: the agent's own
  std::map<std::string, std::string> env;   // merged over the agent's own environment
  std::optional<std::string> stdin_data;    // nullopt: the child reads EOF at once
  std::chrono::milliseconds timeout{60'000};
  std::size_t max_output_bytes = std::size_t{10} << 20;  // per stream
  // Streaming: output goes to the sink as it is read (still capped per stream) and the
  // result's stdout/stderr stay empty. When the sink fails or reports its receiver gone, the
  // command is killed at once (its whole session) and reaped. Must outlive the run.
  output_sink* sink = nullptr;
};

struct exec_result {
  // The child's exit status; 128+N when killed by signal N; 124 on timeout;
  // 127 (126 for a permission problem) when it could not be executed.
  int exit_code = 0;
  std::string stdout_data;  // raw bytes
  std::string stderr_data;  // raw bytes
  std::chrono::milliseconds duration{0};
  bool timed_out = false;
  bool truncated = false;  // some output beyond max_output_bytes was dropped
  bool abandoned = false;  // the sink's receiver left; the command was killed
  // Died of SIGKILL while the cgroup's OOM-kill count went up (see oom.hpp). run() always
  // sets it; nullopt where nobody watched (a session's command).
  std::optional<bool> oom_killed;
};

// Errors: invalid_argument (empty argv, NUL bytes, cwd missing or not a directory),
// unavailable (no fds or processes left to start the child). A program that cannot be
// executed is not an error but a result with exit code 126/127 and a message on stderr.
//
// Returns once the child has exited: output that background processes (`cmd &`) write
// after that is not waited for. A timeout sends SIGKILL to the child's whole process group.
// The OOM-kill counter is read under cgroup_root() (oom.hpp).
boost::asio::awaitable<result<exec_result>> run(exec_request req);

namespace detail {
// Test seam: false makes run() wait for exits the way it does where pidfd_open is missing
// (kernels before 5.3, seccomp profiles that predate it).
void use_pidfd(bool enabled);
}  // namespace detail

}  // namespace sandfort::agent
