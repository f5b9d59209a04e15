#pragma once
// Sandboxes: their rows and the labels a list filters on (src/store/sandboxes.cpp).
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

struct sandbox_record {
  std::string id;  // "sbx-" + 16 hex
  std::string org_id;
  std::string name;   // empty: unnamed. Unique per organization among rows not deleted.
  std::string state;  // creating | pulling | started | stopped | error | deleted
  std::string snapshot;
  std::string spec_json;  // the request as validated (resources, env, labels, ...), owned by the sandbox module
  std::string container_id;
  std::string error_message;
  std::string created_at;
  std::string updated_at;
  std::optional<std::string> expires_at;
  std::string proxy_secret_sha256;  // the egress proxy credential's secret, hashed
  std::string preview_key;          // preview tokens are HMACs under this key
  std::string address;              // IPv4 on the sandbox network while started, else empty
};

// What a page reads besides the rows it returns: without labels, nothing (the live rows of the
// organization from the cursor on, in id order; a state filter skips the live rows in other
// states); with labels, the live sandboxes that carry the first label, from the cursor on, whose
// other labels or state do not match. Deleted rows are read only when state is "deleted".
struct sandbox_filter {
  std::string state;     // empty: any state but deleted
  std::string after_id;  // cursor: ids sort ascending
  std::size_t limit = 100;
  // (key, value): only sandboxes whose spec_json `labels` object has every one. At most 64.
  std::vector<std::pair<std::string, std::string>> labels;
};

class sandbox_store {
 public:
  // Implicit: a part that needs only this store is handed the database it lives in.
  sandbox_store(database& db) : db_(&db) {}  // NOLINT

  // conflict when the name is taken in that organization. The labels of spec_json become
  // searchable (sandbox_filter::labels) in the same statement.
  result<void> insert_sandbox(const sandbox_record& s);
  // By id, else by name (an id wins over a name that looks like one): two index lookups whatever
  // the organization's history. Rows in state deleted are not found.
  result<sandbox_record> get_sandbox(const std::string& org_id, const std::string& id_or_name);
  // One query per page (see sandbox_filter); invalid_argument beyond 64 label filters.
  result<std::vector<sandbox_record>> list_sandboxes(const std::string& org_id, const sandbox_filter& filter);
  // Updates state, container_id, error_message, address, the proxy credential's hash and
  // updated_at of one row. A deleted row is final: updating it is not_found, so a stale copy
  // held across an await cannot revive it.
  result<void> update_sandbox(const sandbox_record& s);
  // Updates spec_json, expires_at and updated_at (PATCH), apart from the state so that neither
  // overwrites the other with a stale copy.
  result<void> update_sandbox_spec(const sandbox_record& s);
  // Daemon-wide lookup by id for the egress proxy and the preview router, which are reached
  // without an organization's key: rows in state deleted are not found.
  result<sandbox_record> find_live_sandbox(const std::string& id);
  // Daemon-wide, for reconciliation and the TTL reaper: every row not deleted, of every
  // organization, by id. Reads live rows only.
  result<std::vector<sandbox_record>> list_live_sandboxes_all_orgs();
  // Daemon-wide, for GET /metrics: {state, how many} of the rows not deleted, by state. Reads
  // live rows only, however many deleted ones there are.
  result<std::vector<std::pair<std::string, std::int64_t>>> count_live_sandboxes_by_state();

  // The organization's sandboxes that are not deleted: what its quotas count.
  result<std::vector<sandbox_record>> list_live_sandboxes(const std::string& org_id);

  // --- keeping history bounded ---
  // Removes up to `batch` rows of sandboxes deleted before `deleted_before` (RFC 3339 as
  // format_time writes it), oldest first, in one short statement; returns how many. Their labels
  // went when they were deleted; the audit log keeps their story.
  result<std::size_t> prune_deleted_sandboxes(const std::string& deleted_before, std::size_t batch);

  // Moves on each change this process makes to a sandbox's row, through any sandbox_store,
  // committed or not: what has not moved since a read may be trusted without reading again
  // (read_cache.hpp; the started sandboxes of sandbox::command_service).
  static std::uint64_t generation();

 private:
  database* db_;
};

}  // namespace sandfort::store
