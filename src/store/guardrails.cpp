// The guardrails' rows: an organization's limits and kill switch, and sandboxes' deletion deadlines.
#include "sandfort/store/guardrail_store.hpp"

#include "statement.hpp"

namespace sandfort::store {

using detail::query;
using detail::statement;

result<org_guardrails> guardrail_store::get_org_guardrails(const std::string& org_id) {
  auto row = query(*db_,
                   "SELECT max_sandboxes, max_millicpus, max_memory_mb, allowed_images, stopped_since, "
                   "stopped_by_superadmin, updated_at, max_volumes, max_snapshots, max_disk_mb, allowed_runtimes, "
                   "egress_defaults "
                   "FROM org_guardrails "
                   "WHERE org_id = ?1",
                   org_id)
                 .first([&](const statement& st) {
                   org_guardrails g;
                   g.org_id = org_id;
                   g.max_sandboxes = st.column_optional_int64(0);
                   g.max_millicpus = st.column_optional_int64(1);
                   g.max_memory_mb = st.column_optional_int64(2);
                   g.allowed_images_json = st.column_optional_text(3);
                   g.stopped_since = st.column_optional_text(4);
                   g.stopped_by_superadmin = st.column_int64(5) != 0;
                   g.updated_at = st.column_text(6);
                   g.max_volumes = st.column_optional_int64(7);
                   g.max_snapshots = st.column_optional_int64(8);
                   g.max_disk_mb = st.column_optional_int64(9);
                   g.allowed_runtimes_json = st.column_optional_text(10);
                   g.egress_defaults_json = st.column_optional_text(11);
                   return g;
                 });
  if (!row) return std::move(row).err();
  if (!*row) {
    org_guardrails none;
    none.org_id = org_id;
    return none;
  }
  return std::move(**row);
}

result<void> guardrail_store::put_org_guardrails(const org_guardrails& g) {
  return query(
             *db_,
             "INSERT INTO org_guardrails (org_id, max_sandboxes, max_millicpus, max_memory_mb, allowed_images, "
             "stopped_since, stopped_by_superadmin, updated_at, max_volumes, max_snapshots, max_disk_mb, "
             "allowed_runtimes, egress_defaults) "
             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) "
             "ON CONFLICT (org_id) DO UPDATE SET max_sandboxes = ?2, max_millicpus = ?3, max_memory_mb = ?4, "
             "allowed_images = ?5, stopped_since = ?6, stopped_by_superadmin = ?7, updated_at = ?8, max_volumes = ?9, "
             "max_snapshots = ?10, max_disk_mb = ?11, allowed_runtimes = ?12, egress_defaults = ?13",
             g.org_id, g.max_sandboxes, g.max_millicpus, g.max_memory_mb, g.allowed_images_json, g.stopped_since,
             g.stopped_by_superadmin, g.updated_at, g.max_volumes, g.max_snapshots, g.max_disk_mb,
             g.allowed_runtimes_json, g.egress_defaults_json)
      .run();
}

result<void> guardrail_store::set_sandbox_deadline(const sandbox_deadline& d) {
  return query(*db_,
               "INSERT OR REPLACE INTO sandbox_deadlines (sandbox_id, org_id, delete_after, reason) "
               "VALUES (?1, ?2, ?3, ?4)",
               d.sandbox_id, d.org_id, d.delete_after, d.reason)
      .run();
}

result<void> guardrail_store::clear_sandbox_deadline(const std::string& sandbox_id) {
  return query(*db_, "DELETE FROM sandbox_deadlines WHERE sandbox_id = ?1", sandbox_id).run();
}

result<std::vector<sandbox_deadline>> guardrail_store::due_sandbox_deadlines(const std::string& now,
                                                                             std::size_t limit) {
  return query(*db_,
               "SELECT sandbox_id, org_id, delete_after, reason FROM sandbox_deadlines "
               "WHERE delete_after <= ?1 ORDER BY delete_after LIMIT ?2",
               now, limit)
      .rows([](const statement& st) {
        return sandbox_deadline{st.column_text(0), st.column_text(1), st.column_text(2), st.column_text(3)};
      });
}

}  // namespace sandfort::store
