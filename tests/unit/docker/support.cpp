#include "support.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>

#include "support/prerequisite.hpp"

namespace sandfort::docker::test {

std::string unique_token() {
  static std::atomic<int> counter{0};
  auto now = std::chrono::steady_clock::now().time_since_epoch();
  return std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now).count() % 100'000'000) + "-" +
         std::to_string(counter++);
}

bool docker_tests_enabled() {
  if (const char* skip = std::getenv("SANDFORT_SKIP_DOCKER_TESTS"); skip && std::string(skip) == "1") {
    testing::missing_prerequisite("SANDFORT_SKIP_DOCKER_TESTS=1: a test that needs the Docker engine");
    return false;
  }
  unix_engine engine(unix_engine_options{.socket_path = "/var/run/docker.sock",
                                         .timeout = std::chrono::milliseconds(10'000),
                                         .pull_timeout = std::chrono::milliseconds(10'000)});
  auto version = run(engine.version(), std::chrono::seconds(20));
  if (!version)
    FAIL("the Docker engine does not answer at /var/run/docker.sock (" << version.err().message
                                                                       << "); start it with scripts/setup, "
                                                                          "or set SANDFORT_SKIP_DOCKER_TESTS=1 to "
                                                                          "skip these tests deliberately");
  return true;
}

command_result run_command(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {};
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {};
  }
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  command_result out;
  char buf[4096];
  for (;;) {
    auto n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.output.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

container_sweeper::~container_sweeper() {
  try {
    unix_engine engine(unix_engine_options{});
    auto found = run(engine.list_containers({std::string(test_label) + "=" + token_}), std::chrono::seconds(60));
    if (!found) return;
    for (const auto& c : *found) (void)run(engine.remove_container(c.id), std::chrono::seconds(60));
  } catch (...) {  // a destructor must not throw; the test has already reported what went wrong
  }
}

}  // namespace sandfort::docker::test
