#pragma once
// Snapshots (docs/api.md, "Snapshots"): a started, paused or stopped sandbox's filesystem
// committed as an image the organization can create sandboxes from (a running one keeps
// running). The image's name is random and its labels carry only this daemon's instance and the
// snapshot's id. Memory and processes are not part of a snapshot (a commit copies files only).
// Deleting one that a sandbox not deleted was created from is a conflict.

#include <optional>
#include <string>

#include "sandfort/sandbox/named_resources.hpp"
#include "sandfort/sandbox/operation_marks.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

inline constexpr const char* label_snapshot = "io.sandfort.snapshot";
inline constexpr const char* snapshot_repository = "sandfort-snap";

// List, get and remove are the named-resource service's (named_resources.hpp).
class snapshot_service : public named_resource_service<store::snapshot_record, snapshot_view, snapshot_page> {
 public:
  // `limits`: the configured guardrails (max_snapshots), read at each create. While a sandbox's
  // container is committed, the events the commit causes (pause, unpause) are the daemon's own:
  // the commit holds one of `marks` (the reconciler's) meanwhile.
  snapshot_service(store::database& db, docker::engine& engine, const clock& clk, const guardrails_config& limits,
                   operation_marks& marks);

  // Refused with 429 quota_exceeded, before Docker is asked, when the organization has
  // max_snapshots snapshots not deleted (creates in flight included).
  task<snapshot_view> create(const std::string& org_id, const snapshot_create_request& req, const audit::actor& who);

  // For a create's `snapshot`: the organization's ready snapshot of that name or id; nullopt when
  // the value is an image reference instead; not_found for a snapshot image's own name (they
  // are reached through their organization's names only), conflict while one is being deleted.
  result<std::optional<store::snapshot_record>> resolve(const std::string& org_id, const std::string& value);

 private:
  store::sandbox_store sandboxes_;
  operation_marks& marks_;
};

}  // namespace sandfort::sandbox
