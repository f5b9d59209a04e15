#pragma once
// The sandbox store as the egress proxy and the preview router see it (their directory
// interfaces, backed by store::sandbox_store): both are reached without an organization's API
// key, so they look a sandbox up by its id alone, and only live rows count (a deleted sandbox's
// credential and preview URLs die with its row).

#include <functional>

#include "sandfort/preview/server.hpp"
#include "sandfort/proxy/proxy.hpp"
#include "sandfort/sandbox/activity.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

class egress_lookup final : public proxy::egress_directory {
 public:
  // An organization's secret as it is now (hosts, placement, value opened), or nullopt when it is
  // gone: sandfortd's, which holds the sealing key.
  using secret_source =
      std::function<std::optional<proxy::injected_secret>(const std::string& org_id, const std::string& name)>;
  explicit egress_lookup(store::sandbox_store sandboxes, secret_source secrets = {})
      : sandboxes_(sandboxes), secrets_(std::move(secrets)) {}
  // The sandbox's secrets are looked up too, each time: a secret rotated or deleted since is
  // injected as it is now, or not at all.
  std::optional<proxy::sandbox_egress> find(const std::string& sandbox_id) override;

 private:
  store::sandbox_store sandboxes_;
  secret_source secrets_;
};

class preview_lookup final : public preview::preview_directory {
 public:
  // Each lookup (one per preview request or connection) counts as use of the sandbox in `activity`.
  explicit preview_lookup(store::sandbox_store sandboxes, activity_tracker* activity = nullptr)
      : sandboxes_(sandboxes), activity_(activity) {}
  std::optional<preview::preview_target> find(const std::string& sandbox_id) override;

 private:
  store::sandbox_store sandboxes_;
  activity_tracker* activity_;
};

}  // namespace sandfort::sandbox
