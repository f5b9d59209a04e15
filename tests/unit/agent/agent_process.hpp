#pragma once
// The real sandfort-agent binary as a child process on a temporary unix socket, for the tests
// that drive it over HTTP. agent_process only starts it (for tests of how it starts or fails to);
// agent_binary also waits until it answers /health, its one readiness signal, as sandfortd does.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sandfort/http/client.hpp"
#include "support/run_coroutine.hpp"

extern char** environ;

namespace sandfort::agent::test {

class agent_process {
 public:
  explicit agent_process(std::string socket, std::vector<std::string> extra_flags = {})
      : socket_(std::move(socket)) {
    std::vector<std::string> args = {SANDFORT_AGENT_PATH, "--socket", socket_};
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, SANDFORT_AGENT_PATH, nullptr, nullptr, argv.data(), environ) != 0)
      throw std::runtime_error("cannot start " SANDFORT_AGENT_PATH);
  }
  // SIGTERM first: the agent kills its shells and commands on the way out.
  ~agent_process() {
    if (pid_ <= 0) return;
    if (terminate() < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  agent_process(const agent_process&) = delete;
  agent_process& operator=(const agent_process&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }

  // Sends SIGTERM and returns the exit status, or -1 if it did not exit within limit.
  int terminate(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    ::kill(pid_, SIGTERM);
    return wait_exit(limit);
  }

  // The exit status once it exits by itself, or -1 if it did not within limit.
  int wait_exit(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

 private:
  std::string socket_;
  pid_t pid_ = -1;
};

// True once the agent on socket answers /health, within limit.
inline bool wait_healthy(const std::string& socket, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto res = sandfort::testing::run_coroutine(
        http::unix_request(socket, http::make_request(http::verb::get, "/health"), http::client_options{}));
    if (res.ok() && res->result_int() == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class agent_binary : public agent_process {
 public:
  explicit agent_binary(std::string socket, std::vector<std::string> extra_flags = {})
      : agent_process(std::move(socket), std::move(extra_flags)) {
    if (!wait_healthy(this->socket())) throw std::runtime_error("the agent did not answer /health");
  }
};

}  // namespace sandfort::agent::test
