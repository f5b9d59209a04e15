#pragma once
// Helpers shared by the Docker tests: driving coroutines, unique names, child processes,
// and the guard that removes test containers even when a test fails.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sandfort/docker/engine.hpp"

#include "support/run_coroutine.hpp"
#include "unix_engine.hpp"

namespace sandfort::docker::test {

inline constexpr const char* base_image = "sandfort/base:bookworm";
inline constexpr const char* test_label = "io.sandfort.test";

template <typename T>
T run(boost::asio::awaitable<T> work, std::chrono::seconds limit = std::chrono::seconds(120)) {
  return sandfort::testing::run_coroutine(std::move(work), limit);
}

// The engine on /var/run/docker.sock, with room for a slow machine.
inline unix_engine real_engine() {
  return unix_engine(unix_engine_options{.socket_path = "/var/run/docker.sock",
                                         .timeout = std::chrono::milliseconds(30'000),
                                         .pull_timeout = std::chrono::milliseconds(60'000)});
}

// Unique per process and call, for names and labels that must not collide with other runs.
std::string unique_token();

// True when the real-engine tests should run. SANDFORT_SKIP_DOCKER_TESTS=1 skips them
// (with a warning); otherwise an engine that does not answer FAILs the calling test.
bool docker_tests_enabled();

struct command_result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs argv (looked up in PATH) to completion.
command_result run_command(const std::vector<std::string>& argv);

// Removes every container carrying io.sandfort.test=<token> when it goes out of scope.
class container_sweeper {
 public:
  explicit container_sweeper(std::string token) : token_(std::move(token)) {}
  ~container_sweeper();
  container_sweeper(const container_sweeper&) = delete;
  container_sweeper& operator=(const container_sweeper&) = delete;

 private:
  std::string token_;
};

}  // namespace sandfort::docker::test
