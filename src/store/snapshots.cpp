// Snapshots: an organization's committed sandbox filesystems.
#include "sandfort/store/database.hpp"

#include <algorithm>

#include "statement.hpp"

namespace sandfort::store {

using detail::statement;

namespace {

constexpr const char* snapshot_columns =
    "id, org_id, name, image_ref, size_bytes, source_sandbox_id, state, created_at, updated_at";

snapshot_record read_snapshot(const statement& st) {
  snapshot_record s;
  s.id = st.column_text(0);
  s.org_id = st.column_text(1);
  s.name = st.column_text(2);
  s.image_ref = st.column_text(3);
  s.size_bytes = st.column_int64(4);
  s.source_sandbox_id = st.column_text(5);
  s.state = st.column_text(6);
  s.created_at = st.column_text(7);
  s.updated_at = st.column_text(8);
  return s;
}

}  // namespace

const std::string& detail::snapshot_used_by_sql() {
  static const std::string q =
      "SELECT id FROM sandboxes INDEXED BY sandboxes_live_by_snapshot WHERE snapshot = ?1 AND state <> 'deleted' "
      "LIMIT 1";
  return q;
}

const std::string& detail::live_snapshots_all_orgs_sql() {
  static const std::string q = std::string("SELECT ") + snapshot_columns +
                               " FROM snapshots INDEXED BY snapshots_live_name WHERE state <> 'deleted'";
  return q;
}

// The snapshot quota's count (guardrails): the organization's entries of the live-only index, so
// deleted rows, however many, are never read.
const std::string& detail::count_live_snapshots_sql() {
  static const std::string q =
      "SELECT count(*) FROM snapshots INDEXED BY snapshots_live_name WHERE org_id = ?1 AND state <> 'deleted'";
  return q;
}

result<void> database::insert_snapshot(const snapshot_record& s) {
  auto st = prepare(std::string("INSERT INTO snapshots (") + snapshot_columns +
                    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  if (!st) return std::move(st).err();
  st->bind(1, s.id);
  st->bind(2, s.org_id);
  st->bind(3, s.name);
  st->bind(4, s.image_ref);
  st->bind(5, s.size_bytes);
  st->bind(6, s.source_sandbox_id);
  st->bind(7, s.state);
  st->bind(8, s.created_at);
  st->bind(9, s.updated_at);
  return detail::insert_named(*st, "snapshot", "snapshots", s.name, s.id, s.org_id);
}

result<snapshot_record> database::get_snapshot(const std::string& org_id, const std::string& id_or_name) {
  // Two lookups, each on its own index: the primary key, then the live name.
  static const std::string by_id = std::string("SELECT ") + snapshot_columns +
                                   " FROM snapshots WHERE id = ?2 AND org_id = ?1 AND state <> 'deleted'";
  static const std::string by_name = std::string("SELECT ") + snapshot_columns +
                                     " FROM snapshots WHERE org_id = ?1 AND name = ?2 AND state <> 'deleted'";
  for (const std::string* q : {&by_id, &by_name}) {
    auto st = prepare(*q);
    if (!st) return std::move(st).err();
    st->bind(1, org_id);
    st->bind(2, id_or_name);
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (*row) return read_snapshot(*st);
  }
  return make_error(errc::not_found, "snapshot " + id_or_name + " not found");
}

result<std::vector<snapshot_record>> database::list_snapshots(const std::string& org_id, const std::string& after_name,
                                                              std::size_t limit) {
  auto st = prepare(std::string("SELECT ") + snapshot_columns +
                    " FROM snapshots INDEXED BY snapshots_live_name WHERE org_id = ?1 AND name > ?2 AND "
                    "state <> 'deleted' ORDER BY name LIMIT ?3");
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  st->bind(2, after_name);
  st->bind(3, static_cast<std::int64_t>(std::min<std::size_t>(limit, 100'000)));
  std::vector<snapshot_record> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (!*row) return out;
    out.push_back(read_snapshot(*st));
  }
}

result<void> database::set_snapshot_state(const std::string& org_id, const std::string& id, const std::string& state,
                                          const std::vector<std::string>& from, const std::string& at) {
  auto current = get_snapshot(org_id, id);
  if (!current) return std::move(current).err();
  if (current->id != id) return make_error(errc::not_found, "snapshot " + id + " not found");
  if (std::find(from.begin(), from.end(), current->state) == from.end())
    return make_error(errc::conflict, "snapshot " + current->name + " is " + current->state);
  auto st = prepare("UPDATE snapshots SET state = ?3, updated_at = ?4 WHERE id = ?1 AND org_id = ?2 AND state = ?5");
  if (!st) return std::move(st).err();
  st->bind(1, id);
  st->bind(2, org_id);
  st->bind(3, state);
  st->bind(4, at);
  st->bind(5, current->state);
  return st->run();
}

result<std::optional<std::string>> database::snapshot_used_by(const std::string& image_ref) {
  auto st = prepare(detail::snapshot_used_by_sql());
  if (!st) return std::move(st).err();
  st->bind(1, image_ref);
  auto row = st->step();
  if (!row) return std::move(row).err();
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(st->column_text(0));
}

result<std::vector<snapshot_record>> database::list_live_snapshots_all_orgs() {
  auto st = prepare(detail::live_snapshots_all_orgs_sql());
  if (!st) return std::move(st).err();
  std::vector<snapshot_record> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (!*row) return out;
    out.push_back(read_snapshot(*st));
  }
}

result<std::int64_t> database::count_live_snapshots(const std::string& org_id) {
  auto st = prepare(detail::count_live_snapshots_sql());
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  auto row = st->step();
  if (!row) return std::move(row).err();
  if (!*row) return std::int64_t{0};
  return st->column_int64(0);
}

}  // namespace sandfort::store
