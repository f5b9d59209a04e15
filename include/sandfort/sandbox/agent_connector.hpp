#pragma once
// How sandfortd reaches the agent inside a sandbox. The first connector speaks HTTP over the
// per-sandbox unix socket in the sandbox's host directory; a `docker exec` stdio relay (for
// gVisor, Docker Desktop, remote engines) can implement the same interface later.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/sandbox/types.hpp"

namespace sandfort::sandbox {

// What the connector sends the agent: the service has already validated and defaulted it.
struct agent_exec {
  exec_request request;
  std::chrono::milliseconds timeout{60'000};
  std::uint64_t max_output_bytes = 10u << 20;
};

class agent_connector {
 public:
  virtual ~agent_connector() = default;
  // Succeeds once the agent answers its health check.
  virtual boost::asio::awaitable<result<void>> health(const std::string& sandbox_id,
                                                       std::chrono::milliseconds timeout) = 0;
  virtual boost::asio::awaitable<result<exec_result>> exec(const std::string& sandbox_id, const agent_exec& call) = 0;
};

class unix_socket_connector final : public agent_connector {
 public:
  explicit unix_socket_connector(std::string state_dir) : state_dir_(std::move(state_dir)) {}
  std::string socket_path(const std::string& sandbox_id) const;

  boost::asio::awaitable<result<void>> health(const std::string& sandbox_id,
                                               std::chrono::milliseconds timeout) override;
  boost::asio::awaitable<result<exec_result>> exec(const std::string& sandbox_id, const agent_exec& call) override;

 private:
  std::string state_dir_;
};

// Where a sandbox's host directory and its agent socket live under the state directory.
std::string sandbox_host_dir(const std::string& state_dir, const std::string& sandbox_id);
std::string sandbox_run_dir(const std::string& state_dir, const std::string& sandbox_id);

}  // namespace sandfort::sandbox
