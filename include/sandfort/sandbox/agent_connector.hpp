#pragma once
// How sandfortd reaches the agent inside a sandbox. The first connector speaks HTTP over the
// per-sandbox unix socket in the sandbox's host directory; a `docker exec` stdio relay (for
// gVisor, Docker Desktop, remote engines) can implement the same interface later.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/sandbox/types.hpp"

namespace sandfort::sandbox {

// What the connector sends the agent: the service has already validated and defaulted it.
struct agent_exec {
  exec_request request;
  std::chrono::milliseconds timeout{60'000};
  std::uint64_t max_output_bytes = 10u << 20;
};

// Where streamed output goes: the api module adapts it to the client's connection. A write
// that returns false means the reader is gone and the producer must stop.
class byte_sink {
 public:
  virtual ~byte_sink() = default;
  virtual boost::asio::awaitable<bool> write(std::string_view bytes) = 0;

  // Set by the producer while it runs: the reader calls it when it goes away between writes
  // (a command that prints nothing for minutes must still die with its reader).
  std::function<void()> abandon;
};

class agent_connector {
 public:
  virtual ~agent_connector() = default;
  // The agent's own HTTP API for this sandbox, as a unix socket path: the api module forwards
  // sessions, background commands, files, ports and the PTY there unchanged.
  virtual std::string endpoint(const std::string& sandbox_id) const = 0;
  // Succeeds once the agent answers its health check.
  virtual boost::asio::awaitable<result<void>> health(const std::string& sandbox_id,
                                                       std::chrono::milliseconds timeout) = 0;
  virtual boost::asio::awaitable<result<exec_result>> exec(const std::string& sandbox_id, const agent_exec& call) = 0;
  // The same command with its output as server-sent events (stdout, stderr, exit) written to
  // sink as they happen. An error means nothing was written.
  virtual boost::asio::awaitable<result<void>> exec_stream(const std::string& sandbox_id, const agent_exec& call,
                                                           byte_sink& sink) = 0;
  // TCP ports listening inside the sandbox (url and previewable are left for the service).
  virtual boost::asio::awaitable<result<std::vector<listening_port>>> ports(const std::string& sandbox_id) = 0;
};

class unix_socket_connector final : public agent_connector {
 public:
  explicit unix_socket_connector(std::string state_dir) : state_dir_(std::move(state_dir)) {}
  std::string socket_path(const std::string& sandbox_id) const;
  std::string endpoint(const std::string& sandbox_id) const override { return socket_path(sandbox_id); }

  boost::asio::awaitable<result<void>> health(const std::string& sandbox_id,
                                               std::chrono::milliseconds timeout) override;
  boost::asio::awaitable<result<exec_result>> exec(const std::string& sandbox_id, const agent_exec& call) override;
  boost::asio::awaitable<result<void>> exec_stream(const std::string& sandbox_id, const agent_exec& call,
                                                   byte_sink& sink) override;
  boost::asio::awaitable<result<std::vector<listening_port>>> ports(const std::string& sandbox_id) override;

 private:
  std::string state_dir_;
};

// Where a sandbox's host directory and its agent socket live under the state directory.
std::string sandbox_host_dir(const std::string& state_dir, const std::string& sandbox_id);
std::string sandbox_run_dir(const std::string& state_dir, const std::string& sandbox_id);

}  // namespace sandfort::sandbox
