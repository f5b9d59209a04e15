#include "pty/terminal.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "process/child.hpp"

extern char** environ;

namespace sandfort::agent::pty {
namespace {

namespace asio = boost::asio;
using asio::posix::stream_descriptor;
constexpr const char* default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr const char* terminal_type = "xterm-256color";

std::string errno_text(int err) { return std::system_category().message(err); }

class unique_fd {
 public:
  explicit unique_fd(int fd = -1) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

result<void> check_cwd(const std::string& cwd) {
  if (cwd.empty()) return {};
  struct stat st {};
  if (::stat(cwd.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return make_error(errc::invalid_argument, "cwd '" + cwd + "' does not exist");
    if (err == ENOTDIR) return make_error(errc::invalid_argument, "cwd '" + cwd + "' is not a directory");
    return make_error(errc::invalid_argument, "cwd '" + cwd + "' is not accessible: " + errno_text(err));
  }
  if (!S_ISDIR(st.st_mode)) return make_error(errc::invalid_argument, "cwd '" + cwd + "' is not a directory");
  return {};
}

// bash where there is one (in the agent's PATH, which is the sandbox's), else the POSIX shell;
// as a login shell, so /etc/profile sets the prompt and PATH a user expects.
std::vector<std::string> default_shell() {
  const char* path_env = std::getenv("PATH");
  std::string_view path = path_env ? path_env : default_path;
  while (!path.empty()) {
    auto colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    path = colon == std::string_view::npos ? std::string_view{} : path.substr(colon + 1);
    if (dir.empty() || dir.front() != '/') continue;
    std::string candidate = std::string(dir) + "/bash";
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return {candidate, "-l"};
  }
  return {"/bin/sh", "-l"};
}

// The agent's environment (the sandbox's), with TERM describing the terminal we emulate and
// no COLUMNS/LINES that would contradict the window size.
std::vector<std::string> terminal_environment() {
  std::vector<std::string> out;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view e(*entry);
    std::string_view key = e.substr(0, e.find('='));
    if (key == "TERM" || key == "COLUMNS" || key == "LINES") continue;
    out.emplace_back(e);
  }
  out.push_back(std::string("TERM=") + terminal_type);
  return out;
}

struct pty_pair {
  unique_fd master;
  std::string slave_path;
};

result<pty_pair> open_pty(window_size size) {
  unique_fd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (master.get() < 0) return make_error(errc::unavailable, "cannot open a pseudo-terminal: " + errno_text(errno));
  char name[128];
  if (::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0 || ::ptsname_r(master.get(), name, sizeof name) != 0)
    return make_error(errc::unavailable, "cannot set up a pseudo-terminal: " + errno_text(errno));
  // Set on the master, these apply to the terminal the program sees, before it starts.
  winsize ws{};
  ws.ws_col = size.cols;
  ws.ws_row = size.rows;
  ::ioctl(master.get(), TIOCSWINSZ, &ws);
  termios modes{};
  if (::tcgetattr(master.get(), &modes) == 0) {
    modes.c_iflag |= IUTF8;  // erase whole UTF-8 characters in line editing
    ::tcsetattr(master.get(), TCSANOW, &modes);
  }
  return pty_pair{std::move(master), name};
}

// posix_spawn runs the child's setsid before its file actions, so the slave it opens (without
// O_NOCTTY) becomes the controlling terminal of the new session: job control and Ctrl-C work.
// With vfork semantics the child has its session and has executed when this returns.
int spawn(const std::vector<std::string>& args, const std::string& cwd, const std::string& slave_path, pid_t& pid) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  auto env = terminal_environment();
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  spawn_setup s;
  ::posix_spawn_file_actions_addopen(&s.actions, 0, slave_path.c_str(), O_RDWR, 0);
  ::posix_spawn_file_actions_adddup2(&s.actions, 0, 1);
  ::posix_spawn_file_actions_adddup2(&s.actions, 0, 2);
  if (!cwd.empty()) ::posix_spawn_file_actions_addchdir_np(&s.actions, cwd.c_str());
  ::posix_spawn_file_actions_addclosefrom_np(&s.actions, 3);

  // The agent ignores SIGPIPE and handles SIGTERM; the program starts from the defaults.
  sigset_t all, none;
  ::sigfillset(&all);
  ::sigemptyset(&none);
  ::posix_spawnattr_setsigdefault(&s.attr, &all);
  ::posix_spawnattr_setsigmask(&s.attr, &none);
  ::posix_spawnattr_setflags(&s.attr, static_cast<short>(POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF |
                                                         POSIX_SPAWN_SETSIGMASK));
  return ::posix_spawn(&pid, argv[0], &s.actions, &s.attr, argv.data(), envp.data());
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
    auto start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return -1;
    rest = rest.substr(start);
    if (field == 3) break;
    rest = rest.substr(std::min(rest.find(' '), rest.size()));
  }
  pid_t session = -1;
  std::from_chars(rest.data(), rest.data() + rest.size(), session);
  return session;
}

}  // namespace

result<terminal> terminal::start(const asio::any_io_executor& executor, const terminal_spec& spec) {
  if (auto cwd = check_cwd(spec.cwd); !cwd) return std::move(cwd).err();
  std::vector<std::string> argv = spec.argv.empty() ? default_shell() : spec.argv;
  auto pty = open_pty(spec.size);
  if (!pty) return std::move(pty).err();

  pid_t pid = -1;
  if (int err = spawn(argv, spec.cwd, pty->slave_path, pid); err != 0)
    return make_error(errc::unavailable, "cannot start " + argv[0] + ": " + errno_text(err));
  auto notifier = exit_notifier(pid);
  if (!notifier) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return std::move(notifier).err();
  }
  stream_descriptor master(executor);
  stream_descriptor exited(executor);
  boost::system::error_code ec;
  master.assign(pty->master.release(), ec);
  if (!ec) master.non_blocking(true, ec);
  if (!ec) exited.assign(notifier->release(), ec);
  terminal term(std::move(master), std::move(exited), pid);  // from here on, ~terminal reaps
  if (ec) return make_error(errc::unavailable, "cannot watch the terminal: " + ec.message());
  return term;
}

terminal::terminal(stream_descriptor master, stream_descriptor exited, pid_t pid)
    : master_(std::move(master)), exited_(std::move(exited)), pid_(pid) {}

terminal::terminal(terminal&& other) noexcept
    : master_(std::move(other.master_)), exited_(std::move(other.exited_)), pid_(std::exchange(other.pid_, -1)) {}

terminal::~terminal() {
  if (pid_ <= 0) return;
  kill();
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

result<void> terminal::resize(window_size size) {
  winsize ws{};
  ws.ws_col = size.cols;
  ws.ws_row = size.rows;
  if (::ioctl(master_.native_handle(), TIOCSWINSZ, &ws) != 0)
    return make_error(errc::internal, "cannot resize the terminal: " + errno_text(errno));
  return {};
}

// Processes whose session is the program's, other than the program. Only called while the
// program is unreaped, so its pid cannot have been reused as another session's id.
template <typename Fn>
void terminal::for_each_other_in_session(Fn&& fn) const {
  if (pid_ <= 0) return;
  DIR* proc = ::opendir("/proc");
  if (!proc) return;
  while (dirent* entry = ::readdir(proc)) {
    pid_t pid = 0;
    std::string_view name(entry->d_name);
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc{} || end != name.data() + name.size() || pid == pid_) continue;
    if (session_of(pid) == pid_ && !fn(pid)) break;
  }
  ::closedir(proc);
}

void terminal::signal_session(int sig) {
  if (pid_ <= 0) return;
  ::kill(-pid_, sig);
  if (pid_t foreground = ::tcgetpgrp(master_.native_handle()); foreground > 0) ::kill(-foreground, sig);
  for_each_other_in_session([sig](pid_t pid) {
    ::kill(pid, sig);
    return true;
  });
}

bool terminal::session_has_others() const {
  bool found = false;
  for_each_other_in_session([&found](pid_t) {
    found = true;
    return false;
  });
  return found;
}

void terminal::hang_up() {
  signal_session(SIGHUP);
  signal_session(SIGCONT);
}

void terminal::kill() { signal_session(SIGKILL); }

int terminal::reap() {
  if (pid_ <= 0) return 255;
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (r < 0) return 255;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

}  // namespace sandfort::agent::pty
