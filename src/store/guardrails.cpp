// The guardrails' rows: an organization's limits and kill switch, and sandboxes' deletion deadlines.
#include "sandfort/store/database.hpp"

#include "statement.hpp"

namespace sandfort::store {

using detail::statement;

namespace {

void bind_optional(statement& st, int index, const std::optional<std::int64_t>& v) {
  if (v) st.bind(index, *v);
  else st.bind_null(index);
}

std::optional<std::int64_t> optional_int(const statement& st, int index) {
  if (!st.column_optional_text(index)) return std::nullopt;
  return st.column_int64(index);
}

}  // namespace

result<org_guardrails> database::get_org_guardrails(const std::string& org_id) {
  auto st = prepare("SELECT max_sandboxes, max_millicpus, max_memory_mb, allowed_images, stopped_since, "
                    "stopped_by_superadmin, updated_at, max_volumes, max_snapshots, max_disk_mb FROM org_guardrails WHERE org_id = ?1");
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  auto row = st->step();
  if (!row) return std::move(row).err();
  org_guardrails g;
  g.org_id = org_id;
  if (!*row) return g;
  g.max_sandboxes = optional_int(*st, 0);
  g.max_millicpus = optional_int(*st, 1);
  g.max_memory_mb = optional_int(*st, 2);
  g.allowed_images_json = st->column_optional_text(3);
  g.stopped_since = st->column_optional_text(4);
  g.stopped_by_superadmin = st->column_int64(5) != 0;
  g.updated_at = st->column_text(6);
  g.max_volumes = optional_int(*st, 7);
  g.max_snapshots = optional_int(*st, 8);
  g.max_disk_mb = optional_int(*st, 9);
  return g;
}

result<void> database::put_org_guardrails(const org_guardrails& g) {
  auto st = statement::prepare(
      db_,
      "INSERT INTO org_guardrails (org_id, max_sandboxes, max_millicpus, max_memory_mb, allowed_images, "
      "stopped_since, stopped_by_superadmin, updated_at, max_volumes, max_snapshots, max_disk_mb) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
      "ON CONFLICT (org_id) DO UPDATE SET max_sandboxes = ?2, max_millicpus = ?3, max_memory_mb = ?4, "
      "allowed_images = ?5, stopped_since = ?6, stopped_by_superadmin = ?7, updated_at = ?8, max_volumes = ?9, "
      "max_snapshots = ?10, max_disk_mb = ?11");
  if (!st) return std::move(st).err();
  st->bind(1, g.org_id);
  bind_optional(*st, 2, g.max_sandboxes);
  bind_optional(*st, 3, g.max_millicpus);
  bind_optional(*st, 4, g.max_memory_mb);
  st->bind(5, g.allowed_images_json);
  st->bind(6, g.stopped_since);
  st->bind(7, std::int64_t{g.stopped_by_superadmin ? 1 : 0});
  st->bind(8, g.updated_at);
  bind_optional(*st, 9, g.max_volumes);
  bind_optional(*st, 10, g.max_snapshots);
  bind_optional(*st, 11, g.max_disk_mb);
  return st->run();
}

result<void> database::set_sandbox_deadline(const sandbox_deadline& d) {
  auto st = prepare("INSERT OR REPLACE INTO sandbox_deadlines (sandbox_id, org_id, delete_after, reason) "
                               "VALUES (?1, ?2, ?3, ?4)");
  if (!st) return std::move(st).err();
  st->bind(1, d.sandbox_id);
  st->bind(2, d.org_id);
  st->bind(3, d.delete_after);
  st->bind(4, d.reason);
  return st->run();
}

result<void> database::clear_sandbox_deadline(const std::string& sandbox_id) {
  auto st = prepare("DELETE FROM sandbox_deadlines WHERE sandbox_id = ?1");
  if (!st) return std::move(st).err();
  st->bind(1, sandbox_id);
  return st->run();
}

result<std::vector<sandbox_deadline>> database::due_sandbox_deadlines(const std::string& now, std::size_t limit) {
  auto st = prepare("SELECT sandbox_id, org_id, delete_after, reason FROM sandbox_deadlines "
                               "WHERE delete_after <= ?1 ORDER BY delete_after LIMIT ?2");
  if (!st) return std::move(st).err();
  st->bind(1, now);
  st->bind(2, static_cast<std::int64_t>(limit));
  std::vector<sandbox_deadline> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (!*row) return out;
    out.push_back(sandbox_deadline{st->column_text(0), st->column_text(1), st->column_text(2), st->column_text(3)});
  }
}

}  // namespace sandfort::store
