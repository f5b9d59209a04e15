#pragma once
// The low-level pieces shared by everything in the agent that starts processes (one-shot
// exec, persistent shells, background commands): descriptors, spawning in a new session,
// exit notification without SIGCHLD or polling, and killing what a process left behind.

#include <spawn.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "process/fd.hpp"
#include "process/runner.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent {

// posix_spawn's attribute and file-action objects, destroyed with this (every spawn of the agent
// builds one: processes, sessions, terminals).
struct spawn_setup {
  spawn_setup() {
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawnattr_init(&attr);
  }
  ~spawn_setup() {
    ::posix_spawn_file_actions_destroy(&actions);
    ::posix_spawnattr_destroy(&attr);
  }
  spawn_setup(const spawn_setup&) = delete;
  spawn_setup& operator=(const spawn_setup&) = delete;

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
};


struct pipe_ends {
  unique_fd read;
  unique_fd write;
};

// A close-on-exec pipe whose ends are both above 2 (see lift_fd).
result<pipe_ends> make_pipe();

// Moves fd to the lowest free descriptor >= minimum (close-on-exec), so that mapping
// descriptors onto 0/1/2/3 in a child never clobbers another source.
bool lift_fd(unique_fd& fd, int minimum);

// A read-only /dev/null opened on first use and kept for the agent's life (close-on-exec, at
// or above 4: above every target of a spawn's standard descriptors), for a child with nothing
// to read: it reads EOF, as from the write end of a pipe closed at once, without a pipe per
// command. -1 when it cannot be opened (then give the child a pipe).
int null_input();

// The request checks of run(): argv, env, timeout and cwd.
result<void> validate(const exec_request& req);

// The agent's environment with overrides merged over it ("KEY=value" entries).
std::vector<std::string> merged_environment(const std::map<std::string, std::string>& overrides);
// PATH as the child will see it.
std::string search_path(const std::map<std::string, std::string>& overrides);

struct program {
  std::string path;  // empty: not found, see error
  int error = 0;
};
// Like execvp's search, but in the child's PATH. Relative entries are relative to cwd.
program resolve_program(const std::string& name, const std::string& path_var, const std::string& cwd);

struct spawn_spec {
  std::string path;                 // what to execute
  std::vector<std::string> argv;
  std::vector<std::string> env;     // the whole environment
  std::string cwd;                  // empty: the agent's
  // Descriptors the child gets, by target number, in order (targets 0, 1, 2, then 3...).
  // Sources must be above every target (use lift_fd). Everything else is closed.
  std::vector<std::pair<int, int>> fds;  // {source, target}
};

// posix_spawn (vfork semantics) in a new session with default signal dispositions and an
// empty mask: when it returns, the child has its own session and process group, so a kill of
// the group can never race the setsid. Returns 0 or an errno.
int spawn_process(const spawn_spec& spec, pid_t& pid);

// A descriptor that becomes readable when pid exits, without reaping it: a pidfd, or where
// the kernel or seccomp refuses pidfd_open, a pipe whose write end a thread closes once
// waitid(WNOWAIT) returns. Neither needs a SIGCHLD handler or polling.
result<unique_fd> exit_notifier(pid_t pid);

// Waits for an exited (or SIGKILLed) child: 128+N when killed by signal N. -1 and errno on
// failure. *signal, when given, gets N for a death by signal and 0 for an exit, which the
// number alone cannot tell apart from exit(128+N).
int reap(pid_t pid, int* signal = nullptr);

// The session id of pid (from /proc), or -1.
pid_t session_of(pid_t pid);
// The process group of pid (from /proc, works for zombies too), or -1.
pid_t process_group_of(pid_t pid);

// SIGKILL to the process group sid, the process sid, and every process whose session is sid.
// Call it while sid's leader is unreaped (or its session still has members), so the number
// cannot have been reused.
void kill_session(pid_t sid);

// The direct children of pid (from /proc/pid/task/pid/children, or a scan of /proc).
std::vector<pid_t> children_of(pid_t pid);
// SIGKILL to pid and everything below it.
void kill_tree(pid_t pid);

}  // namespace sandfort::agent
