#pragma once
// The network side of sandboxes (docs/security.md, "The sandbox network"; docs/api.md,
// "Network"): the internal bridge network they all join, each one's address on it, the preview
// links of its ports and the ports listening inside it, and the hooks that close what a stopped
// or deleted sandbox still has open (its proxy tunnels and preview relays).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/core/config.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/activity.hpp"
#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

class network_service {
 public:
  network_service(const config& cfg, store::database& db, docker::engine& engine, agent_connector& agent,
                  activity_tracker& activity);

  // Creates the sandbox network, or adopts the one a previous run created; refuses a network of
  // that name that is not internal or lets containers talk to each other. Sandboxes cannot be
  // created until it succeeded.
  task<docker::network_info> prepare();
  bool ready() const { return network_.has_value(); }
  // The network prepare() found (only once ready()).
  const docker::network_info& info() const { return *network_; }

  // The container's current address on the sandbox network into rec.address (empty if none).
  task<void> refresh_address(store::sandbox_record& rec);

  // Called with a sandbox's id when it stops or is deleted, so the egress proxy and the preview
  // router close what that sandbox still has open.
  void on_disconnect(std::function<void(const std::string&)> hook) { hooks_.push_back(std::move(hook)); }
  void disconnect(const std::string& sandbox_id);

  // "http://{port}-sbx-….preview.localhost:8081", or the configured template with {id} filled in.
  std::string preview_url_template(const std::string& sandbox_id) const;
  // The URL and token of one port's preview.
  result<preview_link> preview(const std::string& org_id, const std::string& id_or_name, int port);
  // Ports listening inside a started sandbox, each with its preview URL.
  task<std::vector<listening_port>> ports(const std::string& org_id, const std::string& id_or_name);

 private:
  const config& cfg_;
  store::database& db_;  // the instance id
  store::sandbox_store sandboxes_;
  docker::engine& engine_;
  agent_connector& agent_;
  activity_tracker& activity_;
  std::optional<docker::network_info> network_;
  std::vector<std::function<void(const std::string&)>> hooks_;
};

}  // namespace sandfort::sandbox
