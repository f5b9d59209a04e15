#pragma once
// An organization's named volumes (docs/api.md, "Volumes"): a Docker volume with a random name
// each, whose labels carry only this daemon's instance and the volume's id — the organization
// and the name live in the store, so nothing on the engine ties them together. Mounted by name
// when a sandbox is created (create_request::volumes); each change is in the audit chain with
// its row. Deleting one that a sandbox not deleted still mounts is a conflict.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sandfort/audit/journal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/guardrail_store.hpp"
#include "sandfort/store/resource_store.hpp"

namespace sandfort::sandbox {

inline constexpr const char* label_volume = "io.sandfort.volume";

class volume_service {
 public:
  // `limits`: the configured guardrails (max_volumes), read at each create.
  volume_service(store::database& db, docker::engine& engine, const clock& clk, const guardrails_config& limits);

  // Refused with 429 quota_exceeded, before Docker is asked, when the organization has
  // max_volumes volumes not deleted (creates in flight included).
  task<volume_view> create(const std::string& org_id, const volume_create_request& req, const audit::actor& who);
  result<volume_page> list(const std::string& org_id, const volume_list_request& req);
  result<volume_view> get(const std::string& org_id, const std::string& id_or_name);
  task<void> remove(const std::string& org_id, const std::string& id_or_name, const audit::actor& who);

  // For a create: the ready volumes a spec names, or not_found / conflict (being deleted).
  result<std::vector<store::volume_record>> resolve(const std::string& org_id, const sandbox_spec& spec);
  // The Docker mounts of a sandbox's linked volumes.
  result<std::vector<docker::volume_mount>> mounts_of(const std::string& sandbox_id);

 private:
  store::database& db_;  // transactions, the instance id
  store::resource_store resources_;
  store::guardrail_store guardrails_;
  docker::engine& engine_;
  const clock& clock_;
  const guardrails_config& limits_;
  audit::journal journal_;
  // Creates in flight per organization: checked against the quota and not yet rows. Docker is
  // asked between the check and the insert, so parallel creates would each count only the rows
  // and all pass; counting these as well, on the one I/O thread, lets no burst overshoot.
  // Shared with the creates, which may outlive the service at shutdown.
  std::shared_ptr<std::map<std::string, std::int64_t>> creating_ =
      std::make_shared<std::map<std::string, std::int64_t>>();
};

}  // namespace sandfort::sandbox
