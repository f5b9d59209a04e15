#pragma once
// A program on a pseudo-terminal: the program gets the slave side as its controlling terminal
// in a session of its own; the agent keeps the master side. Knows nothing of HTTP or WebSockets.
//
// Like process/runner, it needs SIGCHLD not ignored (the exit is collected with waitpid) and
// installs no SIGCHLD handler: the exit is seen through a pidfd (or a watcher thread where
// pidfd_open is refused).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <sys/types.h>

#include <string>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::agent::pty {

struct window_size {
  unsigned short cols = 80;
  unsigned short rows = 24;
};

struct terminal_spec {
  std::vector<std::string> argv;  // empty: bash as a login shell if in PATH, else sh
  std::string cwd;                // empty: the agent's own
  window_size size;
};

class terminal {
 public:
  // Errors: invalid_argument (cwd missing or not a directory), unavailable (no pseudo-terminal,
  // no process, or the program could not be executed).
  static result<terminal> start(const boost::asio::any_io_executor& executor, const terminal_spec& spec);

  terminal(terminal&& other) noexcept;
  terminal& operator=(terminal&&) = delete;
  terminal(const terminal&) = delete;
  terminal& operator=(const terminal&) = delete;
  // Kills the session and reaps the program if that has not happened yet.
  ~terminal();

  pid_t pid() const { return pid_; }
  // Terminal output to read, keyboard input to write. Reads fail with EIO once no process
  // holds the terminal any more.
  boost::asio::posix::stream_descriptor& master() { return master_; }
  // Becomes readable when the program has exited (it is not reaped until reap()).
  boost::asio::posix::stream_descriptor& exited() { return exited_; }

  // The kernel sends SIGWINCH to the foreground job when the size changes.
  result<void> resize(window_size size);
  // What closing a terminal window does: SIGHUP (and SIGCONT, for stopped jobs) to the
  // program's session, including the foreground job's process group.
  void hang_up();
  // SIGKILL to every process still in the program's session.
  void kill();
  // Whether processes other than the program remain in its session (jobs it started).
  bool session_has_others() const;
  // Once exited() is readable: collects the program and returns its exit code (128+N when
  // killed by signal N).
  int reap();

 private:
  terminal(boost::asio::posix::stream_descriptor master, boost::asio::posix::stream_descriptor exited, pid_t pid);
  void signal_session(int sig);
  template <typename Fn>
  void for_each_other_in_session(Fn&& fn) const;

  boost::asio::posix::stream_descriptor master_;
  boost::asio::posix::stream_descriptor exited_;
  pid_t pid_ = -1;  // also the session and process group id; -1 once reaped
};

}  // namespace sandfort::agent::pty
