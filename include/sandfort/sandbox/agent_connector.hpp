#pragma once
// How sandfortd reaches the agent inside a sandbox: every connection goes through connect(), the
// one door where the path is resolved inside the container and the listening peer is checked
// (src/sandbox/agent_socket.hpp); buffered calls and forwarded requests reuse connections it
// opened, kept alive (src/sandbox/agent_idle.hpp). A `docker exec` stdio relay (for gVisor, Docker Desktop,
// remote engines) can implement the same interface later.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/home/door.hpp"
#include "sandfort/home/pool.hpp"
#include "sandfort/http/any_stream.hpp"
#include "sandfort/sandbox/answer_workers.hpp"
#include "sandfort/sandbox/types.hpp"

namespace sandfort::sandbox {

using agent_stream = http::any_stream;

// Which sandbox, and the Docker container it runs in (the row's container_id).
struct agent_address {
  std::string sandbox_id;
  std::string container_id;
  bool dials_home = false;  // a gVisor sandbox: reached over the links its agent dials (src/home)
};

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
  // A connection to the agent of that sandbox, proven to end in its container. The api module
  // forwards sessions, background commands, files and the PTY over it unchanged.
  virtual boost::asio::awaitable<result<agent_stream>> connect(const agent_address& at) = 0;
  // A connection an earlier request to that sandbox's agent left open (checked still open and
  // quiet), else a new one from connect(). Only for a request that is written once: one that
  // failed on it is never sent again elsewhere.
  virtual boost::asio::awaitable<result<agent_stream>> connect_kept(const agent_address& at) {
    co_return co_await connect(at);
  }
  // Keeps a connection whose last answer was read to its end for that sandbox's next request,
  // within the bounds of the kept connections (agent_idle.hpp); otherwise closes it.
  virtual void keep(const agent_address&, agent_stream) {}
  // Before its container starts: what the transport needs on the host (the door of a sandbox that
  // dials home, which its container mounts). Nothing for the others.
  virtual result<void> prepare(const agent_address&) { return {}; }
  // Succeeds once the agent answers its health check.
  virtual boost::asio::awaitable<result<void>> health(const agent_address& at, std::chrono::milliseconds timeout) = 0;
  virtual boost::asio::awaitable<result<exec_result>> exec(const agent_address& at, const agent_exec& call) = 0;
  // The same command with its output as server-sent events (stdout, stderr, exit) written to
  // sink as they happen. An error means nothing was written.
  virtual boost::asio::awaitable<result<void>> exec_stream(const agent_address& at, const agent_exec& call,
                                                           byte_sink& sink) = 0;
  // TCP ports listening inside the sandbox (url and previewable are left for the service).
  virtual boost::asio::awaitable<result<std::vector<listening_port>>> ports(const agent_address& at) = 0;
  // Makes a started sandbox of the warm pool the claimant's (src/agent/claim/routes.hpp): env
  // becomes the base environment of every process the agent starts, workdir (when not empty)
  // its working directory. Refused by an agent already claimed.
  virtual boost::asio::awaitable<result<void>> claim(const agent_address& at,
                                                     const std::map<std::string, std::string>& env,
                                                     const std::string& workdir) = 0;
  // The sandbox's container stopped or is gone: whatever was learned about it is stale.
  virtual void forget(const std::string& sandbox_id) = 0;
};

// A TCP connection to `port` on the sandbox's loopback, made by its agent over a connection
// from connect() (sandfort/home/port.hpp): the preview router's way to an application in a
// sandbox that has no address. unavailable: nothing listens there; permission_denied: the port
// is the agent's own.
boost::asio::awaitable<result<agent_stream>> open_port(agent_connector& agent, const agent_address& at,
                                                       unsigned short port);

struct connector_options {
  // The agent's socket inside the container (a tmpfs of the container's own).
  std::string socket_in_container = "/run/sandfort/agent.sock";
  // At most this many bytes of agent answers held in memory at once, over all sandboxes, from
  // the answer's first byte read to the last byte of the response written to the caller: a call
  // whose answer does not fit waits for room (up to budget_wait), then fails with 503. An exec
  // answer takes 1.5 times its length (as read, then as parsed and encoded again).
  std::uint64_t response_budget_bytes = 128u << 20;
  std::chrono::milliseconds budget_wait{30'000};
  // A sandbox that dials home: how long a call waits for one of its links (its agent keeps a few
  // idle and dials another as one is taken; none comes when the agent is dead).
  std::chrono::milliseconds home_wait{5'000};
  // Connections kept open between calls (src/sandbox/agent_idle.hpp): at most this many
  // per sandbox and in all, each for at most idle_timeout (under the agent's own 60 s).
  std::size_t idle_per_sandbox = 4;
  std::size_t idle_total = 256;
  std::chrono::milliseconds idle_timeout{10'000};
};

// Buffered agent answers share one budget of bytes (see connector_options). Used on the I/O
// thread only.
class response_budget {
 public:
  explicit response_budget(std::uint64_t capacity) : capacity_(capacity) {}
  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t in_use() const { return in_use_; }
  bool try_take(std::uint64_t n);
  void give_back(std::uint64_t n) { in_use_ -= std::min(n, in_use_); }

 private:
  std::uint64_t capacity_;
  std::uint64_t in_use_ = 0;
};

// Bytes of the budget held for one answer until whoever holds this is done with it (destroyed
// on the I/O thread).
class budget_share {
 public:
  explicit budget_share(response_budget& budget) : budget_(budget) {}
  budget_share(const budget_share&) = delete;
  budget_share& operator=(const budget_share&) = delete;
  ~budget_share() { budget_.give_back(held_); }
  std::uint64_t capacity() const { return budget_.capacity(); }
  std::uint64_t held() const { return held_; }
  bool try_take(std::uint64_t n);

 private:
  response_budget& budget_;
  std::uint64_t held_ = 0;
};

// Who may answer for a container: the pid namespace of its init process, learned once
// (src/sandbox/agent_socket.hpp).
struct container_identity {
  int init_pid = 0;
  std::uint64_t pid_ns_dev = 0;  // st_dev and st_ino of /proc/<init_pid>/ns/pid
  std::uint64_t pid_ns_ino = 0;
};

class idle_connections;  // src/sandbox/agent_idle.hpp
namespace detail {
struct buffered_call;  // agent_connector.cpp
struct buffered_answer;
}  // namespace detail

// Reaches the agent over the unix socket in the container's /run/sandfort, found through
// /proc/<init pid>/root of the container as Docker reports it.
class container_connector final : public agent_connector {
 public:
  // Large exec answers are parsed on `workers`.
  container_connector(docker::engine& engine, answer_workers& workers, connector_options options = {});
  ~container_connector() override;

  boost::asio::awaitable<result<agent_stream>> connect(const agent_address& at) override;
  boost::asio::awaitable<result<agent_stream>> connect_kept(const agent_address& at) override;
  void keep(const agent_address& at, agent_stream stream) override;
  boost::asio::awaitable<result<void>> health(const agent_address& at, std::chrono::milliseconds timeout) override;
  boost::asio::awaitable<result<exec_result>> exec(const agent_address& at, const agent_exec& call) override;
  boost::asio::awaitable<result<void>> exec_stream(const agent_address& at, const agent_exec& call,
                                                   byte_sink& sink) override;
  boost::asio::awaitable<result<std::vector<listening_port>>> ports(const agent_address& at) override;
  boost::asio::awaitable<result<void>> claim(const agent_address& at, const std::map<std::string, std::string>& env,
                                             const std::string& workdir) override;
  result<void> prepare(const agent_address& at) override;
  void forget(const std::string& sandbox_id) override;

  // Sandboxes that dial home (gVisor) are reached through these; without them such a sandbox is
  // refused ("not served by this daemon").
  void serve_home(home::doors& doors, home::link_pool& pool) {
    doors_ = &doors;
    pool_ = &pool;
  }

  const response_budget& budget() const { return budget_; }

 private:
  boost::asio::awaitable<result<container_identity>> identity(const agent_address& at);
  // One buffered request and its whole answer, over a kept connection when there is one; the
  // connection is kept again after a complete answer.
  boost::asio::awaitable<result<detail::buffered_answer>> ask(const agent_address& at, detail::buffered_call& call,
                                                              budget_share& hold);

  docker::engine& engine_;
  answer_workers& workers_;
  connector_options options_;
  std::map<std::string, container_identity> known_;  // sandbox id → its container's identity
  std::unique_ptr<idle_connections> idle_;
  response_budget budget_;
  home::doors* doors_ = nullptr;
  home::link_pool* pool_ = nullptr;
};

}  // namespace sandfort::sandbox
