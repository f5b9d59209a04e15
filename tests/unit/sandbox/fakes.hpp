#pragma once
// Fakes at the sandbox service's two seams (the Docker engine and the agent connector), a
// fixed clock, and one fixture wiring them to a real SQLite store in a temporary directory.
// The real engine is covered by the docker tests and the integration suite.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <filesystem>
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "../store/temp_dir.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/docker/events.hpp"
#include "sandfort/docker/messages.hpp"
#include "sandfort/sandbox/service.hpp"
#include "sandfort/store/org_store.hpp"

namespace sandfort::sandbox::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

inline asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(d);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

class fixed_clock final : public sandfort::clock {
 public:
  time_point t = std::chrono::sys_days{std::chrono::year{2026} / 1 / 2} + std::chrono::hours(3);
  time_point now() const override { return t; }
};

// The host's memory as the test sets it; roomy unless a test says otherwise.
class fake_host final : public host_memory {
 public:
  std::int64_t mb = 1 << 20;  // 1 TiB
  bool readable = true;
  result<std::int64_t> total_mb() override {
    if (!readable) return make_error(errc::internal, "cannot read /proc/meminfo");
    return mb;
  }
};

// Containers in memory, addressable by id or name like Docker's; every call recorded.
class fake_engine final : public docker::engine {
 public:
  // Knobs.
  bool version_ok = true;
  std::set<std::string> images = {"sandfort/base:bookworm"};
  std::chrono::milliseconds image_check_delay{0};
  std::optional<error> pull_error;
  std::function<void(const std::string&)> on_pull;  // runs while the pull is in progress
  std::optional<error> create_error;
  std::optional<error> remove_error;
  std::optional<error> list_error;
  std::chrono::milliseconds start_delay{0};
  std::optional<int> exit_on_start;  // the container dies at once with this code
  bool oom_on_start = false;

  // Records.
  std::vector<std::string> pulls;
  std::vector<docker::container_spec> created;
  std::vector<std::string> started, removed;
  std::vector<std::pair<std::string, int>> stopped;
  std::map<std::string, docker::container_info> containers;  // by id

  docker::container_info* find(const std::string& id_or_name) {
    for (auto& [id, c] : containers)
      if (id == id_or_name || c.name == id_or_name) return &c;
    return nullptr;
  }

  // The container of a sandbox, by its label (names say nothing about the sandbox).
  docker::container_info* of_sandbox(const std::string& sandbox_id) {
    for (auto& [id, c] : containers)
      if (auto it = c.labels.find(label_sandbox); it != c.labels.end() && it->second == sandbox_id) return &c;
    return nullptr;
  }

  docker::container_info& add_container(const std::string& name, std::map<std::string, std::string> labels,
                                        bool running, int exit_code = 0) {
    docker::container_info c;
    c.id = "ctr-" + random_hex(8);
    c.name = name;
    c.labels = std::move(labels);
    c.running = running;
    c.status = running ? "running" : "exited";
    c.exit_code = exit_code;
    return containers[c.id] = c;
  }

  docker::task<docker::version_info> version() override {
    if (!version_ok) co_return make_error(errc::unavailable, "Docker is unreachable (fake)");
    co_return docker::version_info{"20.10.24", "1.41", "1.12"};
  }
  docker::task<std::string> api_version() override { co_return std::string("1.41"); }
  docker::storage_info storage_answer{"overlay2", "extfs", "/var/lib/docker"};
  docker::task<docker::storage_info> storage() override { co_return storage_answer; }
  std::vector<std::string> runtime_names{"runc", "runsc"};
  docker::task<std::vector<std::string>> runtimes() override { co_return runtime_names; }

  docker::task<bool> image_exists(const std::string& ref) override {
    std::string image = ref;
    if (image_check_delay.count() > 0) co_await sleep_for(image_check_delay);
    co_return images.count(image) > 0;
  }

  docker::task<void> pull_image(const std::string& ref) override {
    std::string image = ref;
    pulls.push_back(image);
    if (on_pull) on_pull(image);
    if (pull_error) co_return *pull_error;
    images.insert(image);
    co_return ok_t{};
  }

  docker::task<std::string> create_container(const docker::container_spec& spec) override {
    created.push_back(spec);
    if (create_error) co_return *create_error;
    if (find(spec.name)) co_return make_error(errc::conflict, "name " + spec.name + " is in use");
    auto& c = add_container(spec.name, spec.labels, false);
    c.status = "created";
    if (spec.network_mode != "none") c.addresses[spec.network_mode] = "10.213.0." + std::to_string(containers.size() + 1);
    co_return c.id;
  }

  struct archive_put {
    std::string container, path, archive;
    bool as_container_user;
  };
  std::vector<archive_put> archives_put;
  docker::task<void> put_archive(const std::string& id, const std::string& path, std::string archive,
                                 bool as_container_user) override {
    archives_put.push_back({id, path, std::move(archive), as_container_user});
    co_return ok_t{};
  }

  docker::task<void> start_container(const std::string& id) override {
    std::string key = id;
    if (start_delay.count() > 0) co_await sleep_for(start_delay);
    auto* c = find(key);
    if (!c) co_return make_error(errc::not_found, "no such container " + key);
    started.push_back(key);
    if (exit_on_start) {
      c->running = false;
      c->status = "exited";
      c->exit_code = *exit_on_start;
      c->oom_killed = oom_on_start;
    } else {
      c->running = true;
      c->status = "running";
    }
    co_return ok_t{};
  }

  docker::task<void> stop_container(const std::string& id, int timeout_s) override {
    stopped.emplace_back(id, timeout_s);
    auto* c = find(id);
    if (!c) co_return make_error(errc::not_found, "no such container " + id);
    c->running = false;
    c->paused = false;
    c->status = "exited";
    // Docker answers after the container died (and told its event stream so).
    if (stop_delay.count() > 0) co_await sleep_for(stop_delay);
    if (stop_error) co_return *stop_error;
    co_return ok_t{};
  }

  // Like Docker's: only a running container pauses, only a paused one unpauses (409 otherwise).
  std::vector<std::string> paused_ids, unpaused_ids;
  std::optional<error> pause_error;
  docker::task<void> pause_container(const std::string& id) override {
    if (pause_error) co_return *pause_error;
    auto* c = find(id);
    if (!c) co_return make_error(errc::not_found, "no such container " + id);
    if (!c->running || c->paused) co_return make_error(errc::conflict, "container " + id + " is not running");
    paused_ids.push_back(id);
    c->paused = true;
    c->status = "paused";
    co_return ok_t{};
  }
  docker::task<void> unpause_container(const std::string& id) override {
    auto* c = find(id);
    if (!c) co_return make_error(errc::not_found, "no such container " + id);
    if (!c->paused) co_return make_error(errc::conflict, "container " + id + " is not paused");
    unpaused_ids.push_back(id);
    c->paused = false;
    c->status = "running";
    co_return ok_t{};
  }

  docker::task<void> remove_container(const std::string& id) override {
    if (remove_error) co_return *remove_error;
    auto* c = find(id);
    if (!c) co_return make_error(errc::not_found, "no such container " + id);
    removed.push_back(id);
    containers.erase(c->id);
    co_return ok_t{};
  }

  docker::task<docker::container_info> inspect_container(const std::string& id) override {
    auto* c = find(id);
    if (!c) co_return make_error(errc::not_found, "no such container " + id);
    co_return *c;
  }

  docker::container_stats sample{12.5, 64 << 20, 1024 << 20, 3};
  docker::task<docker::container_stats> stats(const std::string& id) override {
    if (!find(id)) co_return make_error(errc::not_found, "no such container " + id);
    co_return sample;
  }

  std::map<std::string, docker::network_info> networks;  // by name
  docker::task<docker::network_info> inspect_network(const std::string& name) override {
    auto it = networks.find(name);
    if (it == networks.end()) co_return make_error(errc::not_found, "no such network " + name);
    co_return it->second;
  }
  docker::task<docker::network_info> create_network(const docker::network_spec& spec) override {
    if (networks.count(spec.name)) co_return make_error(errc::conflict, "network " + spec.name + " exists");
    docker::network_info info{"net-" + random_hex(8), spec.name, spec.subnet, spec.gateway, spec.bridge,
                              true, false, spec.labels, {}};
    co_return networks[spec.name] = info;
  }

  // Volumes by name; removing one a container mounts is a conflict, as in Docker.
  std::map<std::string, docker::volume_info> volumes;
  std::optional<error> volume_create_error, volume_remove_error;
  std::vector<std::string> volumes_removed;
  docker::task<docker::volume_info> create_volume(const docker::volume_spec& spec) override {
    if (volume_create_error) co_return *volume_create_error;
    // No mountpoint: the fake has no directory whose mode the service could set.
    docker::volume_info info{spec.name, "local", "", spec.labels, now_unix};
    co_return volumes.emplace(spec.name, info).first->second;
  }
  // What Docker says of when volumes and images were made (fixed_clock's time: made "now").
  std::int64_t now_unix = 1'767'322'800;
  // A volume made behind the service's back (or by a daemon that died before its row).
  docker::volume_info& add_volume(const std::string& name, std::map<std::string, std::string> labels,
                                  std::int64_t created_unix) {
    return volumes[name] = docker::volume_info{name, "local", "", std::move(labels), created_unix};
  }
  std::vector<std::vector<std::string>> volume_lists;  // the label filters of each list_volumes
  docker::task<std::vector<docker::volume_info>> list_volumes(const std::vector<std::string>& label_filters) override {
    volume_lists.push_back(label_filters);
    if (list_error) co_return *list_error;
    std::vector<docker::volume_info> out;
    for (const auto& [name, v] : volumes)
      if (has_labels(v.labels, label_filters)) out.push_back(v);
    co_return out;
  }
  docker::task<void> remove_volume(const std::string& name) override {
    if (volume_remove_error) co_return *volume_remove_error;
    if (!volumes.count(name)) co_return make_error(errc::not_found, "no such volume " + name);
    for (const auto& spec : created)
      for (const auto& v : spec.volumes)
        if (v.volume == name && find(spec.name)) co_return make_error(errc::conflict, "volume " + name + " is in use");
    volumes.erase(name);
    volumes_removed.push_back(name);
    co_return ok_t{};
  }

  // Images: `images` holds the names present, `image_details` (by id) what inspect and list
  // read; a plain name in `images` gets its details (and id) the first time it is looked up.
  // Snapshots: a commit adds an untagged image that keeps the container's environment, as
  // Docker's does; a load adds the archive's image under its tag and records it in `commits`.
  std::vector<std::string> commits;                   // the tags snapshots were loaded under
  std::map<std::string, docker::image_info> image_details;  // by id
  std::map<std::string, std::string> parents;         // image id → the image its container was made from
  std::map<std::string, std::vector<std::string>> image_env;  // image id → Config.Env
  std::vector<std::string> images_removed;            // as remove_image was asked
  std::vector<nlohmann::json> loaded_configs;         // the config of every load
  int raw_commits = 0;
  docker::task<std::string> commit_container(const std::string& id, const std::string& repo, const std::string& tag,
                                             const std::map<std::string, std::string>& labels,
                                             const std::vector<std::string>&) override {
    auto* c = find(id);
    if (!c) co_return make_error(errc::not_found, "no such container " + id);
    ++raw_commits;
    std::string made_from;
    std::vector<std::string> env;
    for (const auto& spec : created)
      if (spec.name == c->name) made_from = spec.image, env = spec.env;
    auto& info = repo.empty() ? add_untagged_image(labels) : add_image(repo + ":" + tag, labels, now_unix);
    parents[info.id] = made_from;
    image_env[info.id] = env;
    co_return info.id;
  }
  // An image with one tag, as a load makes it (or behind the service's back).
  docker::image_info& add_image(const std::string& ref, std::map<std::string, std::string> labels,
                                std::int64_t created_unix) {
    images.insert(ref);
    docker::image_info info{"sha256:" + random_hex(32), {ref}, std::move(labels), created_unix};
    return image_details[info.id] = info;
  }
  docker::image_info& add_untagged_image(std::map<std::string, std::string> labels) {
    docker::image_info info{"sha256:" + random_hex(32), {}, std::move(labels), now_unix};
    return image_details[info.id] = info;
  }
  docker::image_info* image_by_name(const std::string& ref) {
    if (auto it = image_details.find(ref); it != image_details.end()) return &it->second;
    for (auto& [id, img] : image_details)
      if (std::find(img.repo_tags.begin(), img.repo_tags.end(), ref) != img.repo_tags.end()) return &img;
    if (images.count(ref)) return &add_image(ref, {}, now_unix);
    return nullptr;
  }
  // Like dockerd: a name it does not know is matched as an id prefix ("sha256:2", "2f3a…").
  std::map<std::string, std::string> answered_by;  // name → id of the image inspect answers (a fallback match)
  docker::task<docker::image_details> inspect_image(const std::string& ref) override {
    auto* img = answered_by.count(ref) ? &image_details.at(answered_by[ref]) : image_by_name(ref);
    if (!img) {
      std::string prefix = ref.rfind("sha256:", 0) == 0 ? ref : "sha256:" + ref;
      for (auto& [id, candidate] : image_details)
        if (prefix.size() > 7 && id.rfind(prefix, 0) == 0) img = &candidate;
    }
    if (!img) co_return make_error(errc::not_found, "no such image: " + ref);
    nlohmann::json tags = nlohmann::json::array(), digests = nlohmann::json::array();
    for (const auto& t : img->repo_tags) (t.find('@') == std::string::npos ? tags : digests).push_back(t);
    nlohmann::json raw = {{"Id", img->id},
                          {"RepoTags", tags},
                          {"RepoDigests", digests},
                          {"Parent", parents.count(img->id) ? parents[img->id] : ""},
                          {"Architecture", "amd64"},
                          {"Os", "linux"},
                          {"Created", "2026-01-02T03:00:00Z"},
                          {"RootFS", {{"Type", "layers"}, {"Layers", {"sha256:" + std::string(64, 'a')}}}},
                          {"Config", {{"Env", image_env.count(img->id) ? image_env[img->id]
                                                                     : std::vector<std::string>{"PATH=/usr/bin"}},
                                      {"Labels", img->labels}}},
                          {"ContainerConfig", {{"Env", image_env.count(img->id) ? image_env.at(img->id)
                                                                               : std::vector<std::string>{}}}}};
    co_return docker::parse_image_details(raw);
  }
  // Reads the archive as Docker does: manifest.json names the config file and the tag.
  docker::task<void> load_image(std::string archive) override {
    std::map<std::string, std::string> files;
    for (std::size_t at = 0; at + 512 <= archive.size();) {
      std::string name = archive.substr(at, 100).c_str();
      if (name.empty()) break;
      std::size_t size = std::stoul(archive.substr(at + 124, 11), nullptr, 8);
      files[name] = archive.substr(at + 512, size);
      at += 512 + (size + 511) / 512 * 512;
    }
    auto manifest = nlohmann::json::parse(files["manifest.json"]);
    auto config = nlohmann::json::parse(files[manifest[0]["Config"].get<std::string>()]);
    loaded_configs.push_back(config);
    std::string tag = manifest[0]["RepoTags"][0];
    auto& info = add_image(tag, config["config"]["Labels"].get<std::map<std::string, std::string>>(), now_unix);
    image_env[info.id] = config["config"].value("Env", std::vector<std::string>{});
    commits.push_back(tag);
    co_return ok_t{};
  }
  docker::task<std::int64_t> image_size(const std::string& ref) override {
    if (!images.count(ref)) co_return make_error(errc::not_found, "no such image " + ref);
    co_return std::int64_t{1024};
  }
  // By reference or by id; like Docker without force, an image a container was made from and
  // still exists is a conflict.
  docker::task<void> remove_image(const std::string& ref) override {
    std::vector<std::string> refs = {ref};
    auto by_id = image_details.find(ref);
    if (by_id != image_details.end()) refs = by_id->second.repo_tags;
    std::string id = by_id != image_details.end() ? ref : std::string();
    if (id.empty())
      for (const auto& [i, img] : image_details)
        if (img.repo_tags == std::vector<std::string>{ref}) id = i;
    for (const auto& spec : created)
      if (find(spec.name) && ((!id.empty() && spec.image == id) ||
                              std::find(refs.begin(), refs.end(), spec.image) != refs.end()))
        co_return make_error(errc::conflict, "image " + ref + " is in use");
    bool erased = false;
    for (const auto& r : refs) erased = images.erase(r) > 0 || erased;
    if (!id.empty() && image_details.erase(id) > 0) erased = true;
    if (!erased) co_return make_error(errc::not_found, "no such image " + ref);
    images_removed.push_back(ref);
    co_return ok_t{};
  }
  std::vector<std::vector<std::string>> image_lists;  // the label filters of each list_images
  docker::task<std::vector<docker::image_info>> list_images(const std::vector<std::string>& label_filters) override {
    image_lists.push_back(label_filters);
    if (list_error) co_return *list_error;
    std::vector<docker::image_info> out;
    for (const auto& [id, img] : image_details)
      if (has_labels(img.labels, label_filters)) out.push_back(img);
    co_return out;
  }
  // Whether labels carry every filter ("k" or "k=v"), as Docker's label filter matches.
  static bool has_labels(const std::map<std::string, std::string>& labels, const std::vector<std::string>& filters) {
    for (const auto& f : filters) {
      auto eq = f.find('=');
      auto it = labels.find(f.substr(0, eq));
      if (it == labels.end() || (eq != std::string::npos && it->second != f.substr(eq + 1))) return false;
    }
    return true;
  }

  docker::task<std::vector<docker::container_info>> list_containers(
      const std::vector<std::string>& label_filters) override {
    if (list_error) co_return *list_error;
    std::vector<docker::container_info> out;
    for (const auto& [id, c] : containers)
      if (has_labels(c.labels, label_filters)) out.push_back(c);
    co_return out;
  }

  // --- Docker's event stream ---------------------------------------------------------------
  // Events are queued with emit() (or the helpers below, which also change the container as
  // Docker would) and delivered, filtered like the real engine, to the one open stream.
  std::vector<docker::event_subscription> subscriptions;  // one per follow_events call
  std::optional<error> follow_error;                       // follow_events fails at once
  std::chrono::milliseconds stop_delay{0};                 // stop_container answers this late
  std::optional<error> stop_error;                         // ... and then fails
  int streams_open = 0;
  std::int64_t event_clock_nano = 1'767'322'800'000'000'000;  // 2026-01-02T03:00Z, as fixed_clock

  void emit(docker::engine_event ev) {
    if (ev.time_nano == 0) ev.time_nano = event_clock_nano += 1'000'000;
    ev.time = ev.time_nano / 1'000'000'000;
    pending_events_.push_back(std::move(ev));
    if (wakeup_) wakeup_->cancel();
  }
  // The open stream ends (as when dockerd restarts): follow_events returns an error.
  void end_stream() {
    end_requested_ = true;
    if (wakeup_) wakeup_->cancel();
  }
  docker::engine_event container_event(const docker::container_info& c, const std::string& action) const {
    docker::engine_event ev;
    ev.type = "container";
    ev.action = action;
    ev.actor_id = ev.container_id = c.id;
    ev.attributes = c.labels;
    ev.attributes["name"] = c.name;
    return ev;
  }
  docker::engine_event network_event(const std::string& container_id, const std::string& network,
                                     const std::string& action) const {
    docker::engine_event ev;
    ev.type = "network";
    ev.action = action;
    ev.actor_id = "net-" + network;
    ev.container_id = container_id;
    ev.network = network;
    ev.attributes = {{"container", container_id}, {"name", network}, {"type", "bridge"}};
    return ev;
  }
  // The container's init exits (the agent was killed, or the OOM killer struck).
  void kill_container(docker::container_info& c, int exit_code, bool oom = false) {
    c.running = false;
    c.status = "exited";
    c.exit_code = exit_code;
    c.oom_killed = oom;
    c.pid = 0;
    auto joined = c.addresses;
    c.addresses.clear();
    if (oom) emit(container_event(c, "oom"));
    auto die = container_event(c, "die");
    die.attributes["exitCode"] = std::to_string(exit_code);
    die.exit_code = exit_code;
    emit(die);
    for (const auto& [network, address] : joined) emit(network_event(c.id, network, "disconnect"));
  }
  // docker rm -f behind sandfortd's back.
  void remove_behind_back(const std::string& id) {
    auto* c = find(id);
    if (!c) return;
    auto copy = *c;
    containers.erase(copy.id);
    if (copy.running) emit(container_event(copy, "die"));
    emit(container_event(copy, "destroy"));
  }
  void disconnect_network(docker::container_info& c, const std::string& network) {
    c.addresses.erase(network);
    emit(network_event(c.id, network, "disconnect"));
  }
  void connect_network(docker::container_info& c, const std::string& network, const std::string& address) {
    c.addresses[network] = address;
    emit(network_event(c.id, network, "connect"));
  }

  docker::task<void> follow_events(docker::event_subscription sub, docker::event_handler on_event,
                                   std::function<void()> on_open) override {
    subscriptions.push_back(sub);
    if (follow_error) co_return *follow_error;
    co_await asio::this_coro::throw_if_cancelled(false);
    asio::steady_timer wakeup(co_await asio::this_coro::executor);
    wakeup_ = &wakeup;
    ++streams_open;
    struct closing {
      fake_engine& e;
      ~closing() {
        e.wakeup_ = nullptr;
        --e.streams_open;
      }
    } close_on_exit{*this};
    if (on_open) on_open();
    for (;;) {
      while (!pending_events_.empty()) {
        auto ev = std::move(pending_events_.front());
        pending_events_.erase(pending_events_.begin());
        if (docker::subscription_matches(sub, ev)) co_await on_event(ev);
      }
      if (end_requested_) {
        end_requested_ = false;
        co_return make_error(errc::unavailable, "Docker ended its event stream (fake)");
      }
      wakeup.expires_at(asio::steady_timer::time_point::max());
      co_await wakeup.async_wait(asio::as_tuple(asio::use_awaitable));
      auto cs = co_await asio::this_coro::cancellation_state;
      if (cs.cancelled() != asio::cancellation_type::none)
        co_return make_error(errc::unavailable, "stopped following Docker's events (fake)");
    }
  }

 private:
  std::vector<docker::engine_event> pending_events_;
  asio::steady_timer* wakeup_ = nullptr;
  bool end_requested_ = false;
};

class fake_connector final : public agent_connector {
 public:
  bool healthy = true;
  int health_calls = 0;
  std::vector<std::pair<std::string, agent_exec>> execs;
  std::vector<std::string> forgotten;
  result<exec_result> exec_answer = exec_result{0, "hello\n", "", std::nullopt, std::nullopt, 3, false, false};

  asio::awaitable<result<agent_stream>> connect(const agent_address&) override {
    co_return make_error(errc::unavailable, "the fake connector has no sockets");
  }
  void forget(const std::string& sandbox_id) override { forgotten.push_back(sandbox_id); }

  struct claim_call {
    std::string sandbox_id;
    std::map<std::string, std::string> env;
    std::string workdir;
  };
  std::vector<claim_call> claims;
  result<void> claim_answer = ok_t{};
  asio::awaitable<result<void>> claim(const agent_address& at, const std::map<std::string, std::string>& env,
                                      const std::string& workdir) override {
    claims.push_back({at.sandbox_id, env, workdir});
    co_return claim_answer;
  }

  asio::awaitable<result<void>> health(const agent_address&, std::chrono::milliseconds) override {
    ++health_calls;
    if (!healthy) co_return make_error(errc::unavailable, "cannot connect to the agent (fake)");
    co_return ok_t{};
  }

  // When set, an exec is answered only once the gate is cancelled (commands in progress together).
  std::shared_ptr<asio::steady_timer> exec_gate;
  asio::awaitable<result<exec_result>> exec(const agent_address& at, const agent_exec& call) override {
    execs.emplace_back(at.sandbox_id, call);
    if (auto gate = exec_gate) co_await gate->async_wait(asio::as_tuple(asio::use_awaitable));
    co_return exec_answer;
  }

  std::vector<listening_port> listening = {{8080, "0.0.0.0", "ipv4", 7, "python3", "", false},
                                           {5432, "127.0.0.1", "ipv4", std::nullopt, std::nullopt, "", false}};
  asio::awaitable<result<std::vector<listening_port>>> ports(const agent_address&) override { co_return listening; }

  // Streams: writes stream_chunks to the sink, then answers stream_answer; or, when that is an
  // error, answers it at once. stream_end is answered after the chunks (an agent that stops
  // answering in the middle).
  // As the agent writes them (src/agent/process/sse.cpp): output events carry {"data": text}.
  std::vector<std::string> stream_chunks = {"event: stdout\ndata: {\"data\":\"hi\"}\n\n",
                                            "event: exit\ndata: {\"exit_code\":0}\n\n"};
  result<void> stream_answer = ok_t{};
  result<void> stream_end = ok_t{};
  asio::awaitable<result<void>> exec_stream(const agent_address& at, const agent_exec& call,
                                            byte_sink& sink) override {
    execs.emplace_back(at.sandbox_id, call);
    if (!stream_answer) co_return stream_answer;
    for (const auto& chunk : stream_chunks) {
      std::string_view bytes = chunk;
      if (!co_await sink.write(bytes)) co_return ok_t{};
    }
    co_return stream_end;
  }
};

// Collects what a stream writes.
class collecting_sink final : public byte_sink {
 public:
  std::string bytes;
  int writes = 0;
  asio::awaitable<bool> write(std::string_view b) override {
    bytes.append(b);
    ++writes;
    co_return true;
  }
};

// One service over the fakes, a real store and a temporary state directory. Everything runs
// on one io_context, on the test's thread, as in sandfortd.
struct fixture {
  asio::io_context ioc;
  sandfort::testing::temp_dir dir;
  config cfg;
  std::unique_ptr<store::database> db;
  fixed_clock clk;
  fake_engine engine;
  fake_connector agent;
  fake_host host;
  std::unique_ptr<audit::group_writer> events;  // the commands' events: a real writer on the same file
  store::org org_a, org_b;
  std::unique_ptr<service> svc;

  // reconciled: as sandfortd before it accepts creates; the reconcile tests start without.
  explicit fixture(bool reconciled = true) {
    cfg.state_dir = dir.file("state");
    cfg.agent_path = "/opt/sandfort/libexec/sandfort-agent";
    cfg.default_image = "sandfort/base:bookworm";
    cfg.agent_start_timeout_s = 10;
    cfg.stop_timeout_s = 7;
    cfg.exec_default_timeout_s = 42;
    cfg.exec_max_timeout_s = 100;
    cfg.output_cap_bytes = 12345;
    cfg.default_resources = {1.5, 768, 300};
    cfg.max_resources = {4.0, 8192, 4096};
    auto opened = store::database::open(dir.file("sandfort.db"));
    if (!opened) throw std::runtime_error("cannot open the store: " + opened.err().message);
    db = std::move(opened).value();
    events = audit::group_writer::open(dir.file("sandfort.db"), clk).value();
    org_a = make_org("alpha");
    org_b = make_org("beta");
    svc = std::make_unique<service>(ioc.get_executor(), cfg, *db, engine, agent, clk, *events, &host);
    auto net = run(svc->network().prepare());
    if (!net) throw std::runtime_error("prepare_network failed: " + net.err().message);
    if (!reconciled) return;
    auto report = run(svc->reconciliation().reconcile());
    if (!report) throw std::runtime_error("reconcile failed: " + report.err().message);
  }

  store::org make_org(const std::string& name) {
    auto o = store::org_store(*db).create_org(name, false, format_time(clk.now()));
    if (!o) throw std::runtime_error("create_org failed: " + o.err().message);
    return *o;
  }

  // Runs work and everything it spawned (background provisioning included) until the
  // io_context has nothing left; throws when that takes longer than limit.
  template <typename T>
  T run(asio::awaitable<T> work, std::chrono::milliseconds limit = 20s) {
    std::optional<T> out;
    std::exception_ptr failure;
    asio::co_spawn(
        ioc, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(work)); },
        [&](std::exception_ptr e) { failure = e; });
    ioc.restart();
    ioc.run_for(limit);
    if (failure) std::rethrow_exception(failure);
    if (!out) throw std::runtime_error("the service call did not finish in time");
    return std::move(*out);
  }

  result<sandbox_view> create(const std::string& org_id, const create_request& req) {
    return run(svc->create(org_id, req));
  }
  // A started sandbox (wait: true), or a failed REQUIRE-style exception.
  sandbox_view create_started(const create_request& req = {}) {
    create_request r = req;
    r.wait = true;
    auto v = create(org_a.id, r);
    if (!v) throw std::runtime_error("create failed: " + v.err().message);
    return *v;
  }
  result<sandbox_view> get(const std::string& org_id, const std::string& id) { return run(svc->get(org_id, id)); }

  // The row even when deleted, straight from the store.
  std::optional<store::sandbox_record> row_any_state(const std::string& org_id, const std::string& id) {
    for (const char* state : {"creating", "pulling", "started", "paused", "stopped", "error", "deleted"}) {
      store::sandbox_filter f;
      f.state = state;
      f.limit = 1000;
      auto rows = store::sandbox_store(*db).list_sandboxes(org_id, f);
      if (!rows) continue;
      for (auto& r : *rows)
        if (r.id == id) return r;
    }
    return std::nullopt;
  }
};

// A volume or snapshot made through the service, as a system actor.
inline result<volume_view> make_volume(fixture& f, const std::string& org_id, const std::string& name) {
  volume_create_request req;
  req.name = name;
  return f.run(f.svc->volumes().create(org_id, req, audit::system_actor()));
}

inline result<snapshot_view> make_snapshot(fixture& f, const std::string& org_id, const std::string& sandbox_id,
                                           const std::string& name) {
  snapshot_create_request req;
  req.sandbox_id = sandbox_id;
  req.name = name;
  return f.run(f.svc->snapshots().create(org_id, req, audit::system_actor()));
}

}  // namespace sandfort::sandbox::test
