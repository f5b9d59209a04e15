#pragma once
// Volumes and snapshots, an organization's named resources (src/store/resources.cpp).
// Over the one connection and statement cache of store::database (database.hpp); a thin handle,
// copied freely, that must not outlive its database.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::store {

// An organization's named volume. The Docker volume's name is random and says nothing of the
// organization or the name: those live here only.
struct volume_record {
  std::string id;  // "vol-" + 16 hex
  std::string org_id;
  std::string name;         // unique per organization among volumes not deleted
  std::string docker_name;  // "sandfort-vol-" + 16 hex
  std::optional<std::int64_t> size_mb;
  std::string state;  // ready | deleting | deleted
  std::string created_at;
  std::string updated_at;
};

// A volume a sandbox mounts, with the volume's names.
struct sandbox_volume {
  std::string sandbox_id;
  std::string volume_id;
  std::string volume_name;
  std::string docker_name;
  std::string mount_path;
  bool read_only = false;
};

// A sandbox's filesystem committed as an image. The image's name is random and says nothing of
// the organization or the name: those live here only.
struct snapshot_record {
  std::string id;  // "snap-" + 16 hex
  std::string org_id;
  std::string name;       // unique per organization among snapshots not deleted
  std::string image_ref;  // "sandfort-snap/<16 hex>:latest"
  std::int64_t size_bytes = 0;
  std::string source_sandbox_id;
  std::string state;  // ready | deleting | deleted
  std::string created_at;
  std::string updated_at;
};

// Volumes and snapshots: an organization's named resources. Both are rows named uniquely per
// organization among those not deleted, ready | deleting | deleted, looked up by id or name and
// listed by name, and one named-resource layer (src/store/resources.cpp) runs those statements
// for both; what differs (a volume's mounts, a snapshot's users) is theirs alone.
class resource_store {
 public:
  // Implicit: a part that needs only this store is handed the database it lives in.
  resource_store(database& db) : db_(&db) {}  // NOLINT

  // --- volumes ---
  // conflict when the organization has a live volume of that name.
  result<void> insert_volume(const volume_record& v);
  // By id, else by name; deleted volumes are not found.
  result<volume_record> get_volume(const std::string& org_id, const std::string& id_or_name);
  // Volumes not deleted, by name, after `after_name` (the cursor), at most `limit`.
  result<std::vector<volume_record>> list_volumes(const std::string& org_id, const std::string& after_name,
                                                  std::size_t limit);
  // Moves a volume to `state` only from one of `from` (conflict otherwise, not_found if absent).
  result<void> set_volume_state(const std::string& org_id, const std::string& id, const std::string& state,
                                const std::vector<std::string>& from, const std::string& at);
  // A sandbox not deleted (stopped and failed ones included: they would mount it again) that
  // mounts the volume, or nullopt: one index lookup.
  result<std::optional<std::string>> volume_mounted_by(const std::string& volume_id);
  result<void> insert_sandbox_volume(const std::string& sandbox_id, const std::string& volume_id,
                                     const std::string& mount_path, bool read_only);
  // The volumes a sandbox mounts, by mount path.
  result<std::vector<sandbox_volume>> list_sandbox_volumes(const std::string& sandbox_id);
  // Daemon-wide, for start-up reconciliation: every volume not deleted, of every organization.
  // Reads the live-only index volumes_live_name, never deleted rows.
  result<std::vector<volume_record>> list_live_volumes_all_orgs();
  // What the organization's volume quota counts: its volumes not deleted (deleting ones count:
  // their Docker volume may still be there). Reads the live-only index volumes_live_name.
  result<std::int64_t> count_live_volumes(const std::string& org_id);

  // --- snapshots ---
  // conflict when the organization has a live snapshot of that name.
  result<void> insert_snapshot(const snapshot_record& s);
  // By id, else by name; deleted snapshots are not found.
  result<snapshot_record> get_snapshot(const std::string& org_id, const std::string& id_or_name);
  // Snapshots not deleted, by name, after `after_name` (the cursor), at most `limit`.
  result<std::vector<snapshot_record>> list_snapshots(const std::string& org_id, const std::string& after_name,
                                                      std::size_t limit);
  // Moves a snapshot to `state` only from one of `from` (conflict otherwise, not_found if absent).
  result<void> set_snapshot_state(const std::string& org_id, const std::string& id, const std::string& state,
                                  const std::vector<std::string>& from, const std::string& at);
  // A sandbox not deleted whose image is `image_ref`, or nullopt: one index lookup.
  result<std::optional<std::string>> snapshot_used_by(const std::string& image_ref);
  // Daemon-wide, for start-up reconciliation: every snapshot not deleted, of every organization.
  // Reads the live-only index snapshots_live_name, never deleted rows.
  result<std::vector<snapshot_record>> list_live_snapshots_all_orgs();
  // What the organization's snapshot quota counts: its snapshots not deleted (deleting ones
  // count). Reads the live-only index snapshots_live_name.
  result<std::int64_t> count_live_snapshots(const std::string& org_id);

 private:
  database* db_;
};

}  // namespace sandfort::store
