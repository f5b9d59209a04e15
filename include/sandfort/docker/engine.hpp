#pragma once
// The Docker Engine as the sandbox backend sees it: typed calls, no raw Docker options
// escaping to callers. `engine` is the seam (tests and a future Kubernetes backend);
// `unix_engine` talks to a real engine over its unix socket.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::docker {

template <typename T>
using task = boost::asio::awaitable<result<T>>;

// What GET /version (the unversioned path) says about the engine.
struct version_info {
  std::string version;          // "20.10.24+dfsg1"
  std::string api_version;      // newest the engine speaks, "1.41"
  std::string min_api_version;  // oldest the engine accepts, "1.12"
};

inline constexpr const char* newest_known_api = "1.47";
inline constexpr const char* oldest_supported_api = "1.41";

// The lower of the engine's ApiVersion and the newest we know; an error naming both when
// that is below the engine's MinAPIVersion or below what we support.
result<std::string> negotiate_api_version(const version_info& engine_says);
// Parses the JSON body of GET /version.
result<version_info> parse_version(const nlohmann::json& body);

struct bind_mount {
  std::string host_path;
  std::string container_path;
  bool read_only = false;
};

// Everything sandfortd ever asks of a container: an allowlist, not Docker's HostConfig.
struct container_spec {
  std::string name;
  std::string image;
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;  // "K=V"
  std::map<std::string, std::string> labels;
  std::string hostname;
  std::string user;     // empty: the image's
  std::string workdir;  // empty: the image's
  std::vector<bind_mount> binds;
  double cpus = 1.0;
  std::int64_t memory_bytes = 0;  // also the memory+swap limit: no swap
  std::int64_t pids_limit = 0;
  std::vector<std::string> cap_add;  // every other capability is dropped
  bool init = true;                  // tini as PID 1 reaps orphans
  std::string network_mode = "none";
  std::string runtime;  // empty: the engine's default
  int stop_timeout_s = 5;
};

// The body of POST /containers/create for spec. Pure, so it is unit-tested.
nlohmann::json to_create_body(const container_spec& spec);

// A bridge network for sandboxes: sandfortd asks for exactly these properties.
struct network_spec {
  std::string name;
  std::string subnet;   // "10.213.0.0/16"
  std::string gateway;  // "10.213.0.1": the bridge's own address on the host
  std::string bridge;   // host interface name, at most 15 characters
  std::map<std::string, std::string> labels;
};

struct network_info {
  std::string id;
  std::string name;
  std::string subnet;   // first IPv4 IPAM entry
  std::string gateway;  // as configured, or the subnet's first host address when Docker left it implicit
  std::string bridge;   // com.docker.network.bridge.name, or "br-<id prefix>" (Docker's default)
  bool internal = false;
  bool inter_container = true;  // com.docker.network.bridge.enable_icc
  std::map<std::string, std::string> labels;
  std::vector<std::string> containers;  // ids of attached containers
};

// The body of POST /networks/create: internal, no traffic between containers, no masquerade.
nlohmann::json to_network_body(const network_spec& spec);
// Reads GET /networks/{name}; pure, so it is unit-tested.
result<network_info> parse_network(const nlohmann::json& body);
// "10.213.0.0/16" → "10.213.0.1"; an error when it is not an IPv4 CIDR with room for hosts.
result<std::string> first_host_address(const std::string& subnet);

// One sample of a running container's resource use, as `docker stats` computes it.
struct container_stats {
  double cpu_percent = 0;  // of one CPU: 2 busy CPUs read 200
  std::int64_t memory_bytes = 0;        // without the reclaimable page cache
  std::int64_t memory_limit_bytes = 0;
  std::int64_t pids = 0;
};

// Reads GET /containers/{id}/stats?stream=false; pure, so it is unit-tested.
container_stats parse_stats(const nlohmann::json& body);

struct container_info {
  std::string id;
  std::string name;
  std::map<std::string, std::string> labels;
  std::string status;  // created | running | paused | restarting | removing | exited | dead
  bool running = false;
  int exit_code = 0;
  bool oom_killed = false;
  std::map<std::string, std::string> addresses;  // network name → IPv4 address (inspect only)
};

class engine {
 public:
  virtual ~engine() = default;

  virtual task<version_info> version() = 0;
  // The API version in use (negotiated on first call).
  virtual task<std::string> api_version() = 0;
  virtual task<bool> image_exists(const std::string& ref) = 0;
  // Pulls ref; a failure is an error whose message names the image and the engine's reason.
  virtual task<void> pull_image(const std::string& ref) = 0;
  // Returns the new container's id. A name already in use is `conflict`.
  virtual task<std::string> create_container(const container_spec& spec) = 0;
  virtual task<void> start_container(const std::string& id) = 0;
  virtual task<void> stop_container(const std::string& id, int timeout_s) = 0;
  // Force-removes the container and its anonymous volumes; absent is `not_found`.
  virtual task<void> remove_container(const std::string& id) = 0;
  virtual task<container_info> inspect_container(const std::string& id) = 0;
  // Every container (running or not) carrying all of the given labels ("k" or "k=v").
  virtual task<std::vector<container_info>> list_containers(const std::vector<std::string>& label_filters) = 0;
  // One sample; the engine takes about a second, measuring CPU use over an interval.
  virtual task<container_stats> stats(const std::string& id) = 0;
  // Absent is `not_found`.
  virtual task<network_info> inspect_network(const std::string& name) = 0;
  // A name already in use is `conflict`.
  virtual task<network_info> create_network(const network_spec& spec) = 0;
};

struct unix_engine_options {
  std::string socket_path = "/var/run/docker.sock";
  std::chrono::milliseconds timeout{30'000};
  std::chrono::milliseconds pull_timeout{600'000};
};

class unix_engine final : public engine {
 public:
  explicit unix_engine(unix_engine_options options);

  task<version_info> version() override;
  task<std::string> api_version() override;
  task<bool> image_exists(const std::string& ref) override;
  task<void> pull_image(const std::string& ref) override;
  task<std::string> create_container(const container_spec& spec) override;
  task<void> start_container(const std::string& id) override;
  task<void> stop_container(const std::string& id, int timeout_s) override;
  task<void> remove_container(const std::string& id) override;
  task<container_info> inspect_container(const std::string& id) override;
  task<std::vector<container_info>> list_containers(const std::vector<std::string>& label_filters) override;
  task<container_stats> stats(const std::string& id) override;
  task<network_info> inspect_network(const std::string& name) override;
  task<network_info> create_network(const network_spec& spec) override;

 private:
  // GET of a versioned path whose 200 answer is JSON; `what` names the call in errors.
  task<nlohmann::json> get_json(const std::string& path, const std::string& what);

  unix_engine_options options_;
  std::string api_version_;  // "" until negotiated
};

}  // namespace sandfort::docker
