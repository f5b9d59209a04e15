#pragma once
// The store as the egress proxy and the preview router see it: both are reached without an
// organization's API key, so they look a sandbox up by its id alone, and only live rows count
// (a deleted sandbox's credential and preview URLs die with its row).

#include "sandfort/preview/server.hpp"
#include "sandfort/proxy/proxy.hpp"
#include "sandfort/sandbox/activity.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::sandbox {

class egress_lookup final : public proxy::egress_directory {
 public:
  explicit egress_lookup(store::database& db) : db_(db) {}
  std::optional<proxy::sandbox_egress> find(const std::string& sandbox_id) override;

 private:
  store::database& db_;
};

class preview_lookup final : public preview::preview_directory {
 public:
  // Each lookup (one per preview request or connection) counts as use of the sandbox in `activity`.
  explicit preview_lookup(store::database& db, activity_tracker* activity = nullptr) : db_(db), activity_(activity) {}
  std::optional<preview::preview_target> find(const std::string& sandbox_id) override;

 private:
  store::database& db_;
  activity_tracker* activity_;
};

}  // namespace sandfort::sandbox
