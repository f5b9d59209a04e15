#pragma once
// An organization's named volumes (docs/api.md, "Volumes"): a Docker volume with a random name
// each, whose labels carry only this daemon's instance and the volume's id — the organization
// and the name live in the store, so nothing on the engine ties them together. Mounted by name
// when a sandbox is created (create_request::volumes); each change is in the audit chain with
// its row. Deleting one that a sandbox not deleted still mounts is a conflict.

#include <string>
#include <vector>

#include "sandfort/sandbox/named_resources.hpp"

namespace sandfort::sandbox {

inline constexpr const char* label_volume = "io.sandfort.volume";

// List, get and remove are the named-resource service's (named_resources.hpp).
class volume_service : public named_resource_service<store::volume_record, volume_view, volume_page> {
 public:
  // `limits`: the configured guardrails (max_volumes), read at each create.
  volume_service(store::database& db, docker::engine& engine, const clock& clk, const guardrails_config& limits);

  // Refused with 429 quota_exceeded, before Docker is asked, when the organization has
  // max_volumes volumes not deleted (creates in flight included).
  task<volume_view> create(const std::string& org_id, const volume_create_request& req, const audit::actor& who);

  // For a create: the ready volumes a spec names, or not_found / conflict (being deleted).
  result<std::vector<store::volume_record>> resolve(const std::string& org_id, const sandbox_spec& spec);
  // The Docker mounts of a sandbox's linked volumes.
  result<std::vector<docker::volume_mount>> mounts_of(const std::string& sandbox_id);
};

}  // namespace sandfort::sandbox
