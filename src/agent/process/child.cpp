#include "process/child.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <thread>

extern char** environ;

namespace sandfort::agent {
namespace {

using std::chrono::milliseconds;
constexpr const char* default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

std::atomic<bool> pidfd_enabled{true};

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

std::string read_proc_file(const std::string& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return {};
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Field `index` (0 = state, 1 = ppid, 2 = pgrp, 3 = session) after "pid (comm) " of /proc/pid/stat; comm may hold
// anything, so count from its closing parenthesis.
long stat_field(pid_t pid, int index) {
  std::string stat = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::string_view rest = std::string_view(stat).substr(close_paren + 1);
  for (int field = 0;; ++field) {
    auto start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return -1;
    rest = rest.substr(start);
    if (field == index) break;
    rest = rest.substr(std::min(rest.find(' '), rest.size()));
  }
  long value = -1;
  std::from_chars(rest.data(), rest.data() + rest.size(), value);
  return value;
}

template <typename Visit>
void for_each_process(Visit visit) {
  DIR* proc = ::opendir("/proc");
  if (!proc) return;
  while (dirent* entry = ::readdir(proc)) {
    pid_t pid = 0;
    std::string_view name(entry->d_name);
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc{} || end != name.data() + name.size()) continue;
    visit(pid);
  }
  ::closedir(proc);
}

}  // namespace

bool lift_fd(unique_fd& fd, int minimum) {
  if (fd.get() >= minimum) return true;
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, minimum);
  if (moved < 0) return false;
  fd.reset(moved);
  return true;
}

int null_input() {
  static const int fd = [] {
    unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!null || !lift_fd(null, 4)) return -1;
    return null.release();
  }();
  return fd;
}

result<pipe_ends> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return make_error(errc::unavailable, "cannot create a pipe: " + errno_text(errno));
  pipe_ends p{unique_fd(fds[0]), unique_fd(fds[1])};
  if (!lift_fd(p.read, 3) || !lift_fd(p.write, 3))
    return make_error(errc::unavailable, "cannot create a pipe: " + errno_text(errno));
  return p;
}

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

int spawn_process(const spawn_spec& spec, pid_t& pid) {
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  spawn_setup s;
  int highest = -1;
  for (const auto& [source, target] : spec.fds) {
    ::posix_spawn_file_actions_adddup2(&s.actions, source, target);
    highest = std::max(highest, target);
  }
  if (!spec.cwd.empty()) ::posix_spawn_file_actions_addchdir_np(&s.actions, spec.cwd.c_str());
  ::posix_spawn_file_actions_addclosefrom_np(&s.actions, highest + 1);

  // The agent ignores SIGPIPE and handles SIGTERM; the child starts from the defaults.
  sigset_t all, none;
  ::sigfillset(&all);
  ::sigemptyset(&none);
  ::posix_spawnattr_setsigdefault(&s.attr, &all);
  ::posix_spawnattr_setsigmask(&s.attr, &none);
  ::posix_spawnattr_setflags(&s.attr, static_cast<short>(POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF |
                                                          POSIX_SPAWN_SETSIGMASK));
  return ::posix_spawn(&pid, spec.path.c_str(), &s.actions, &s.attr, argv.data(), envp.data());
}

result<unique_fd> exit_notifier(pid_t pid) {
  if (pidfd_enabled.load()) {
    long fd = ::syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) return unique_fd(static_cast<int>(fd));  // pidfds are close-on-exec
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

int reap(pid_t pid, int* signal) {
  siginfo_t info{};
  int rc = 0;
  do {
    rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return -1;
  bool exited = info.si_code == CLD_EXITED;
  if (signal) *signal = exited ? 0 : info.si_status;
  return exited ? info.si_status : 128 + info.si_status;
}

pid_t session_of(pid_t pid) { return static_cast<pid_t>(stat_field(pid, 3)); }
pid_t process_group_of(pid_t pid) { return static_cast<pid_t>(stat_field(pid, 2)); }

void kill_session(pid_t sid) {
  if (sid <= 1) return;
  ::kill(-sid, SIGKILL);
  ::kill(sid, SIGKILL);
  for_each_process([sid](pid_t pid) {
    if (pid != sid && session_of(pid) == sid) ::kill(pid, SIGKILL);
  });
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  if (::access(path.c_str(), R_OK) == 0) {
    std::string text = read_proc_file(path);
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
      pid_t child = 0;
      auto [next, ec] = std::from_chars(p, end, child);
      if (ec == std::errc{}) {
        out.push_back(child);
        p = next;
      } else {
        ++p;
      }
    }
    return out;
  }
  for_each_process([&](pid_t candidate) {
    if (stat_field(candidate, 1) == pid) out.push_back(candidate);
  });
  return out;
}

void kill_tree(pid_t pid) {
  if (pid <= 1) return;
  // Collect first: a killed parent's children are reparented and could no longer be found.
  std::vector<pid_t> all{pid};
  for (std::size_t i = 0; i < all.size() && all.size() < 4096; ++i)
    for (pid_t child : children_of(all[i])) all.push_back(child);
  for (pid_t p : all) ::kill(p, SIGKILL);
}

namespace detail {
void use_pidfd(bool enabled) { pidfd_enabled.store(enabled); }
}  // namespace detail

}  // namespace sandfort::agent
