#pragma once
// Guardrails: an organization's limits and kill switch, and the deletion deadlines of sandboxes a
// guardrail stopped (src/store/guardrails.cpp).
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

// An organization's guardrails (docs/guardrails.md). Empty optionals: the configured default.
struct org_guardrails {
  std::string org_id;
  std::optional<std::int64_t> max_sandboxes;
  std::optional<std::int64_t> max_millicpus;
  std::optional<std::int64_t> max_memory_mb;
  std::optional<std::int64_t> max_volumes;         // volumes not deleted (schema version 9)
  std::optional<std::int64_t> max_snapshots;       // snapshots not deleted (schema version 9)
  std::optional<std::int64_t> max_disk_mb;         // disk_mb of sandboxes not deleted (schema version 10)
  std::optional<std::string> allowed_images_json;  // JSON array of patterns, owned by the sandbox module
  std::optional<std::string> allowed_runtimes_json;  // JSON array of runtimes, likewise (schema version 12)
  // The egress policy of sandboxes created without one, JSON {egress_allowlist, egress_deny,
  // egress_rules}, owned by the sandbox module (docs/egress.md); NULL: none (schema version 15).
  std::optional<std::string> egress_defaults_json;
  std::optional<std::string> stopped_since;        // the kill switch: set while new sandboxes are refused
  bool stopped_by_superadmin = false;
  std::string updated_at;
};

// A sandbox a guardrail stopped, and when it is to be deleted unless started again.
struct sandbox_deadline {
  std::string sandbox_id;
  std::string org_id;
  std::string delete_after;
  std::string reason;
};

class guardrail_store {
 public:
  // Implicit: a part that needs only this store is handed the database it lives in.
  guardrail_store(database& db) : db_(&db) {}  // NOLINT

  // The organization's row, or one with only org_id set when it has none.
  result<org_guardrails> get_org_guardrails(const std::string& org_id);
  result<void> put_org_guardrails(const org_guardrails& g);
  // Replaces the sandbox's deadline; clear_sandbox_deadline removes it (started again, deleted).
  result<void> set_sandbox_deadline(const sandbox_deadline& d);
  result<void> clear_sandbox_deadline(const std::string& sandbox_id);
  // Deadlines at or before `now` (RFC 3339 text), oldest first, at most `limit`.
  result<std::vector<sandbox_deadline>> due_sandbox_deadlines(const std::string& now, std::size_t limit);

 private:
  database* db_;
};

}  // namespace sandfort::store
