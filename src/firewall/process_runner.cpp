#include "sandfort/firewall/host_firewall.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

extern char** environ;

namespace sandfort::firewall {
namespace {

// Enough for any message of iptables; a runaway listing is cut rather than held whole.
constexpr std::size_t max_output = std::size_t{1} << 20;

class owned_fd {
 public:
  explicit owned_fd(int fd = -1) : fd_(fd) {}
  ~owned_fd() { reset(); }
  owned_fd(owned_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  owned_fd& operator=(owned_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Above 2, so that dup2 onto 1 and 2 in the child never finds a source already there
// (dup2 of a descriptor onto itself would leave it close-on-exec).
owned_fd above_stdio(int fd) {
  if (fd > 2) return owned_fd(fd);
  int lifted = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return owned_fd(lifted);
}

std::string errno_message(int err) { return std::strerror(err); }

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The spawn settings: stdin from /dev/null, stdout and stderr into write_fd (or /dev/null).
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

  void prepare(int write_fd) {
    ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (write_fd >= 0) {
      ::posix_spawn_file_actions_adddup2(&actions, write_fd, 1);
    } else {
      ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    }
    ::posix_spawn_file_actions_adddup2(&actions, 1, 2);
    // The daemon's own signal setup (handlers, a blocked mask) is not the tool's business.
    sigset_t none;
    sigset_t all;
    ::sigemptyset(&none);
    ::sigfillset(&all);
    ::posix_spawnattr_setsigmask(&attr, &none);
    ::posix_spawnattr_setsigdefault(&attr, &all);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
};

void read_all(int fd, std::string& out) {
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    std::size_t room = max_output - std::min(max_output, out.size());
    out.append(buf, std::min(room, static_cast<std::size_t>(n)));
  }
}

// 128+N for a death by signal N, as a shell reports it.
result<int> wait_for(pid_t pid, const std::string& name) {
  int status = 0;
  pid_t r = -1;
  do {
    r = ::waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return make_error(errc::internal, "cannot collect the exit status of " + name + ": " + errno_message(errno));
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

std::vector<std::string> process_runner::default_search_dirs() { return {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}; }

process_runner::process_runner(std::vector<std::string> search_dirs) : search_dirs_(std::move(search_dirs)) {}

result<int> process_runner::run(const std::vector<std::string>& argv, std::string* output) {
  if (argv.empty() || argv[0].empty()) return make_error(errc::invalid_argument, "no program to run");
  std::string path;
  if (argv[0].find('/') != std::string::npos) {
    path = argv[0];
  } else {
    for (const auto& dir : search_dirs_) {
      if (is_executable_file(dir + "/" + argv[0])) {
        path = dir + "/" + argv[0];
        break;
      }
    }
  }
  if (path.empty()) return make_error(errc::unavailable, argv[0] + " not found in any of the system directories");

  owned_fd read_end;
  owned_fd write_end;
  if (output) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      return make_error(errc::unavailable, "cannot run " + argv[0] + ": pipe: " + errno_message(errno));
    read_end = above_stdio(fds[0]);
    write_end = above_stdio(fds[1]);
    if (read_end.get() < 0 || write_end.get() < 0)
      return make_error(errc::unavailable, "cannot run " + argv[0] + ": out of descriptors");
  }
  spawn_setup setup;
  setup.prepare(output ? write_end.get() : -1);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, path.c_str(), &setup.actions, &setup.attr, args.data(), environ);
  if (rc != 0) return make_error(errc::unavailable, "cannot run " + path + ": " + errno_message(rc));
  if (output) {
    write_end.reset();  // our copy: EOF comes once the tool (and anything it started) is done
    output->clear();
    read_all(read_end.get(), *output);
  }
  return wait_for(pid, argv[0]);
}

}  // namespace sandfort::firewall
