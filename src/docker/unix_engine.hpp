#pragma once
// The engine over its unix socket (the Engine API on /var/run/docker.sock). Private to the docker
// module: sandfortd makes one with make_unix_engine and knows it only as a docker::engine.

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandfort/docker/unix_engine.hpp"

namespace sandfort::docker {

class unix_engine final : public engine {
 public:
  explicit unix_engine(unix_engine_options options);

  task<version_info> version() override;
  task<std::string> api_version() override;
  task<storage_info> storage() override;
  task<std::vector<std::string>> runtimes() override;
  task<bool> image_exists(const std::string& ref) override;
  task<image_details> inspect_image(const std::string& ref) override;
  task<void> load_image(std::string archive) override;
  task<void> put_archive(const std::string& id, const std::string& path, std::string archive,
                         bool as_container_user) override;
  task<void> pull_image(const std::string& ref) override;
  task<std::string> create_container(const container_spec& spec) override;
  task<void> start_container(const std::string& id) override;
  task<void> stop_container(const std::string& id, int timeout_s) override;
  task<void> pause_container(const std::string& id) override;
  task<void> unpause_container(const std::string& id) override;
  task<void> remove_container(const std::string& id) override;
  task<container_info> inspect_container(const std::string& id) override;
  task<std::vector<container_info>> list_containers(const std::vector<std::string>& label_filters) override;
  task<container_stats> stats(const std::string& id) override;
  task<network_info> inspect_network(const std::string& name) override;
  task<network_info> create_network(const network_spec& spec) override;
  task<volume_info> create_volume(const volume_spec& spec) override;
  task<void> remove_volume(const std::string& name) override;
  task<std::vector<volume_info>> list_volumes(const std::vector<std::string>& label_filters) override;
  task<std::string> commit_container(const std::string& id, const std::string& repo, const std::string& tag,
                                     const std::map<std::string, std::string>& labels,
                                     const std::vector<std::string>& env) override;
  task<std::int64_t> image_size(const std::string& ref) override;
  task<void> remove_image(const std::string& ref) override;
  task<std::vector<image_info>> list_images(const std::vector<std::string>& label_filters) override;
  // Event stream (src/docker/events.cpp).
  task<void> follow_events(event_subscription sub, event_handler on_event, std::function<void()> on_open) override;

 private:
  // GET of a versioned path whose 200 answer is JSON; `what` names the call in errors.
  task<nlohmann::json> get_json(const std::string& path, const std::string& what);
  // POST /containers/{id}/{action} answered 204 (pause, unpause).
  task<void> post_container_action(const std::string& id, const std::string& action);

  unix_engine_options options_;
  std::string api_version_;  // "" until negotiated
};

}  // namespace sandfort::docker
