#pragma once
// The Docker Engine as the sandbox backend sees it: typed calls, no raw Docker options
// escaping to callers. `engine` is the seam (tests and a future Kubernetes backend); this
// header holds it and the values it speaks in, nothing else. The real engine over its unix
// socket is unix_engine.hpp; the pure functions that build request bodies and read answers
// are messages.hpp, events.hpp and image_archive.hpp.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
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

struct bind_mount {
  std::string host_path;
  std::string container_path;
  bool read_only = false;
};

// A tmpfs inside the container: memory-backed, gone with the container, never a host path.
struct tmpfs_mount {
  std::string container_path;
  std::int64_t size_bytes = 1 << 20;
  std::int64_t inodes = 256;  // files and directories: empty files take no bytes, but kernel memory
  int mode = 01777;
  // nosuid, nodev and noexec are always set: nothing written there runs or escalates.
};

// A named Docker volume mounted into the container (HostConfig.Mounts, Type "volume").
struct volume_mount {
  std::string volume;          // the Docker volume's name
  std::string container_path;  // absolute, normalized
  bool read_only = false;
  // Docker copies the image's files at container_path into an empty volume (and its owner and
  // mode onto the volume's root) unless told not to: the volume's content and mode would then
  // depend on whichever image mounted it first.
  bool no_copy = true;
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
  std::vector<tmpfs_mount> tmpfs;
  std::vector<volume_mount> volumes;
  double cpus = 1.0;
  std::int64_t memory_bytes = 0;  // also the memory+swap limit: no swap
  std::int64_t pids_limit = 0;
  std::vector<std::string> cap_add;  // every other capability is dropped
  bool init = true;                  // tini as PID 1 reaps orphans
  std::string network_mode = "none";
  std::vector<std::string> dns_options;  // HostConfig.DnsOptions: lines of resolv.conf's `options`
  std::string runtime;  // empty: the engine's default
  int stop_timeout_s = 5;
  // > 0: HostConfig.StorageOpt {"size": "<n>M"}, a hard cap on the writable layer. Only overlay2
  // on XFS mounted with project quotas (pquota) supports it; elsewhere Docker refuses the create.
  std::int64_t storage_size_mb = 0;
};

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

// A named volume of the local driver: sandfortd asks for a name and labels, nothing else.
struct volume_spec {
  std::string name;
  std::map<std::string, std::string> labels;
};

struct volume_info {
  std::string name;
  std::string driver;
  std::string mountpoint;  // where the engine keeps its data on the host
  std::map<std::string, std::string> labels;
  std::int64_t created_unix = 0;  // CreatedAt as unix seconds; 0 when the engine did not say
};

// An image as GET /images/json lists it.
struct image_info {
  std::string id;                      // "sha256:…"
  std::vector<std::string> repo_tags;  // without Docker's "<none>:<none>"
  std::map<std::string, std::string> labels;
  std::int64_t created_unix = 0;  // Created; 0 when the engine did not say
};

// One image as GET /images/{name}/json describes it.
struct image_details {
  std::string id;                         // "sha256:<64 hex>": the only exact name of an image
  std::vector<std::string> repo_tags;     // "python:3.12-slim", "ghcr.io/x/y:1": familiar names
  std::vector<std::string> repo_digests;  // "python@sha256:…"
  std::map<std::string, std::string> labels;  // Config.Labels
  std::string parent;                     // "sha256:…" for a committed image, else empty
  nlohmann::json raw;                     // the whole answer
};

// One sample of a running container's resource use, as `docker stats` computes it.
struct container_stats {
  double cpu_percent = 0;  // of one CPU: 2 busy CPUs read 200
  std::int64_t memory_bytes = 0;        // without the reclaimable page cache
  std::int64_t memory_limit_bytes = 0;
  std::int64_t pids = 0;
};

struct container_info {
  std::string id;
  std::string name;
  std::map<std::string, std::string> labels;
  std::string status;  // created | running | paused | restarting | removing | exited | dead
  bool running = false;  // a paused container is running too: its processes exist, frozen
  bool paused = false;
  int exit_code = 0;
  bool oom_killed = false;
  // The host pid of the container's init process while it runs, 0 otherwise (inspect only).
  int pid = 0;
  std::map<std::string, std::string> addresses;  // network name → IPv4 address (inspect only)
  // Where the container's writes land on the host (inspect only): overlay2's UpperDir, and the
  // host directories of the volumes it mounts read-write. Empty when the driver is another.
  std::string upper_dir;
  std::vector<std::string> writable_volume_dirs;
};

// What GET /info says about the engine's storage: whether a per-container size can be enforced.
struct storage_info {
  std::string driver;              // "overlay2"
  std::string backing_filesystem;  // DriverStatus "Backing Filesystem": "xfs", "extfs", …
  std::string root_dir;            // DockerRootDir: "/var/lib/docker"
};

// --- Docker's event stream (GET /events) -------------------------------------------------------
// Containers die, are removed or lose their network behind our back; the engine says so on its
// event stream, and the sandbox service follows it to bring rows in line.

// One event, as parsed from one JSON line of the stream.
struct engine_event {
  std::string type;    // "container" | "network" | …
  std::string action;  // "die", "oom", "destroy", "stop", "start", "connect", "disconnect", …
  std::string actor_id;
  // Container events: the actor; network events: Attributes.container (may be empty).
  std::string container_id;
  // Network events: the network's name (Attributes.name). Empty for container events.
  std::string network;
  // The actor's attributes. For a container these are its labels (the image's included), plus
  // "name", "image", and "exitCode" on die: a label is how an event is tied back to a row.
  std::map<std::string, std::string> attributes;
  std::optional<int> exit_code;  // die: Attributes.exitCode
  std::int64_t time = 0;         // unix seconds
  std::int64_t time_nano = 0;    // unix nanoseconds (0 when the engine sent none)
  // A line longer than the limit was skipped: an event was lost, what it said is unknown. The
  // stream goes on; a follower should re-check everything this event could have been about.
  bool lost = false;
};

// What to follow. Docker ANDs its filter keys across event types (network events carry no
// labels), so the engine asks for the types and actions and applies labels and network names
// itself: see subscription_matches.
struct event_subscription {
  std::vector<std::string> container_labels;   // "k=v" (or "k"): container events must carry all
  std::vector<std::string> container_actions;  // empty: no container events
  std::vector<std::string> networks;           // names: network events about these only
  std::vector<std::string> network_actions;    // empty: no network events
  std::int64_t since_nano = 0;                 // replay from here (unix ns); 0: from now on
};

// Awaited for every matching event, in order; the stream is not read while it runs.
using event_handler = std::function<boost::asio::awaitable<void>(const engine_event&)>;

class engine {
 public:
  virtual ~engine() = default;

  virtual task<version_info> version() = 0;
  // The API version in use (negotiated on first call).
  virtual task<std::string> api_version() = 0;
  // The storage driver and its backing filesystem (GET /info).
  virtual task<storage_info> storage() = 0;
  // The runtimes registered with the engine (GET /info's Runtimes: "runc", "runsc", …).
  virtual task<std::vector<std::string>> runtimes() = 0;
  virtual task<bool> image_exists(const std::string& ref) = 0;
  // ref is a name ("python:3.12-slim") or an id ("sha256:<64 hex>"); absent is `not_found`.
  // The engine falls back to matching a name it does not know as an image-id prefix: the answer
  // may be another image than the one named, so callers check repo_tags/repo_digests.
  virtual task<image_details> inspect_image(const std::string& ref) = 0;
  // POST /images/load of an archive (layerless_image_archive).
  virtual task<void> load_image(std::string archive) = 0;
  // PUT /containers/{id}/archive: unpacks a tar archive at `path` of the container's filesystem
  // (the engine does it confined to that filesystem). With `as_container_user`, what it unpacks
  // is owned by the container's user, as the engine resolves it in the container's passwd.
  virtual task<void> put_archive(const std::string& id, const std::string& path, std::string archive,
                                 bool as_container_user) = 0;
  // Pulls ref; a failure is an error whose message names the image and the engine's reason.
  virtual task<void> pull_image(const std::string& ref) = 0;
  // Returns the new container's id. A name already in use is `conflict`.
  virtual task<std::string> create_container(const container_spec& spec) = 0;
  virtual task<void> start_container(const std::string& id) = 0;
  virtual task<void> stop_container(const std::string& id, int timeout_s) = 0;
  // Freezes every process of a running container (the cgroup freezer: memory is kept) and
  // thaws it again. A container that is not running, or not paused, is `conflict`.
  virtual task<void> pause_container(const std::string& id) = 0;
  virtual task<void> unpause_container(const std::string& id) = 0;
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
  // Creates a local volume. Docker answers an existing name with that volume (no conflict), so
  // callers pick fresh random names.
  virtual task<volume_info> create_volume(const volume_spec& spec) = 0;
  // Absent is `not_found`; in use by a container (even a stopped one) is `conflict`.
  virtual task<void> remove_volume(const std::string& name) = 0;
  // Every volume carrying all of the given labels ("k" or "k=v").
  virtual task<std::vector<volume_info>> list_volumes(const std::vector<std::string>& label_filters) = 0;
  // Snapshots: commits the container's filesystem as repo:tag (none when both are empty) with
  // labels and returns the image's id. Docker pauses a running container for the commit itself,
  // so it goes on running after. The image keeps the container's whole configuration
  // (ContainerConfig): see rewritten_image_config.
  // `env` goes over the container's environment in the image ("NAME=" keeps a name, drops its value).
  virtual task<std::string> commit_container(const std::string& id, const std::string& repo, const std::string& tag,
                                             const std::map<std::string, std::string>& labels,
                                             const std::vector<std::string>& env) = 0;
  // The image's size in bytes; absent is `not_found`.
  virtual task<std::int64_t> image_size(const std::string& ref) = 0;
  // Absent is `not_found`; used by a container is `conflict`. ref may be an image id
  // ("sha256:…"): never forced, so an image that a container uses, or that has tags in several
  // repositories, is `conflict` and stays.
  virtual task<void> remove_image(const std::string& ref) = 0;
  // Every top-level image (tagged or not; not intermediate layers) carrying all of the given
  // labels ("k" or "k=v").
  virtual task<std::vector<image_info>> list_images(const std::vector<std::string>& label_filters) = 0;

  // Event stream: follows GET /events for sub, awaiting on_event for each matching event, and
  // on_open once the engine has accepted the request (events after this point are not missed).
  // Runs until the stream ends or the caller's coroutine is cancelled; both come back as an
  // error (`unavailable` when the stream ended), so a follower reconnects with `since`.
  virtual task<void> follow_events(event_subscription sub, event_handler on_event,
                                   std::function<void()> on_open) = 0;
};

}  // namespace sandfort::docker
