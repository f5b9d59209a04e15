// Volumes and snapshots: an organization's named resources. One named-resource layer runs the
// statements their shapes share (insert, lookup by id or name, list by name, state changes, the
// live rows of every organization, the quota's count) over a table's description; what differs,
// a volume's mounts and a snapshot's users, follows it.
#include <algorithm>

#include "sandfort/store/resource_store.hpp"
#include "statement.hpp"

namespace sandfort::store {

using detail::query;
using detail::sql;
using detail::statement;

namespace {

// A table of named resources: rows unique by name per organization among those not deleted,
// read through the live-only index `<table>_live_name`.
template <typename Record>
struct resource_table {
  const char* kind;     // "volume": names the row in messages
  const char* table;    // "volumes"
  const char* columns;  // in the order read and insert take them
  Record (*read)(const statement&);

  std::string select(std::string_view rest) const {
    return sql("SELECT ", columns, " FROM ").append(table).append(rest);
  }
  std::string live_index() const { return std::string(" INDEXED BY ") + table + "_live_name"; }
};

volume_record read_volume(const statement& st) {
  return volume_record{st.column_text(0),           st.column_text(1), st.column_text(2), st.column_text(3),
                       st.column_optional_int64(4), st.column_text(5), st.column_text(6), st.column_text(7)};
}

snapshot_record read_snapshot(const statement& st) {
  return snapshot_record{st.column_text(0), st.column_text(1), st.column_text(2), st.column_text(3), st.column_int64(4),
                         st.column_text(5), st.column_text(6), st.column_text(7), st.column_text(8)};
}

const resource_table<volume_record> volumes{
    "volume", "volumes", "id, org_id, name, docker_name, size_mb, state, created_at, updated_at", read_volume};
const resource_table<snapshot_record> snapshots{
    "snapshot", "snapshots",
    "id, org_id, name, image_ref, size_bytes, source_sandbox_id, state, created_at, updated_at", read_snapshot};

// The statements of a table, made once each.
template <typename Record>
struct resource_statements {
  std::string insert, by_id, by_name, list, set_state, live_all_orgs, count_live;
};

template <typename Record>
resource_statements<Record> make_statements(const resource_table<Record>& t) {
  std::string placeholders;
  const auto columns = std::count(t.columns, t.columns + std::char_traits<char>::length(t.columns), ',') + 1;
  for (int i = 1; i <= columns; ++i) placeholders += (i == 1 ? "?" : ", ?") + std::to_string(i);
  return {
      sql("INSERT INTO ", t.table, " (").append(t.columns).append(") VALUES (").append(placeholders).append(")"),
      // Two lookups, each on its own index: the primary key, then the live name.
      t.select(" WHERE id = ?2 AND org_id = ?1 AND state <> 'deleted'"),
      t.select(" WHERE org_id = ?1 AND name = ?2 AND state <> 'deleted'"),
      t.select(t.live_index() + " WHERE org_id = ?1 AND name > ?2 AND state <> 'deleted' ORDER BY name LIMIT ?3"),
      sql("UPDATE ", t.table, " SET state = ?3, updated_at = ?4 WHERE id = ?1 AND org_id = ?2 AND state = ?5"),
      t.select(t.live_index() + " WHERE state <> 'deleted'"),
      // The quota's count (guardrails): the organization's entries of the live-only index, so
      // deleted rows, however many, are never read (deleting ones count: their Docker object may
      // still be there).
      sql("SELECT count(*) FROM ", t.table, t.live_index() + " WHERE org_id = ?1 AND state <> 'deleted'"),
  };
}

// Per record type: each has one table.
template <typename Record>
const resource_statements<Record>& statements_of(const resource_table<Record>& t) {
  static const resource_statements<Record> s = make_statements(t);
  return s;
}

template <typename Record>
result<Record> get_resource(database& db, const resource_table<Record>& t, const std::string& org_id,
                            const std::string& id_or_name) {
  const auto& s = statements_of(t);
  for (const std::string* q : {&s.by_id, &s.by_name}) {
    auto row = query(db, *q, org_id, id_or_name).first(t.read);
    if (!row) return std::move(row).err();
    if (*row) return std::move(**row);
  }
  return make_error(errc::not_found, std::string(t.kind) + " " + id_or_name + " not found");
}

template <typename Record>
result<std::vector<Record>> list_resources(database& db, const resource_table<Record>& t, const std::string& org_id,
                                           const std::string& after_name, std::size_t limit) {
  return query(db, statements_of(t).list, org_id, after_name, std::min<std::size_t>(limit, 100'000)).rows(t.read);
}

template <typename Record>
result<void> set_resource_state(database& db, const resource_table<Record>& t, const std::string& org_id,
                                const std::string& id, const std::string& state, const std::vector<std::string>& from,
                                const std::string& at) {
  auto current = get_resource(db, t, org_id, id);
  if (!current) return std::move(current).err();
  if (current->id != id) return make_error(errc::not_found, std::string(t.kind) + " " + id + " not found");
  if (std::find(from.begin(), from.end(), current->state) == from.end())
    return make_error(errc::conflict, std::string(t.kind) + " " + current->name + " is " + current->state);
  return query(db, statements_of(t).set_state, id, org_id, state, at, current->state).run();
}

constexpr const char* volume_mounted_by_sql =
    "SELECT sv.sandbox_id FROM sandbox_volumes AS sv INDEXED BY sandbox_volumes_by_volume "
    "JOIN sandboxes AS s ON s.id = sv.sandbox_id WHERE sv.volume_id = ?1 AND s.state <> 'deleted' LIMIT 1";

constexpr const char* volumes_of_sandbox_sql =
    "SELECT sv.sandbox_id, sv.volume_id, v.name, v.docker_name, sv.mount_path, sv.read_only "
    "FROM sandbox_volumes AS sv JOIN volumes AS v ON v.id = sv.volume_id WHERE sv.sandbox_id = ?1 "
    "ORDER BY sv.mount_path";

constexpr const char* snapshot_used_by_sql =
    "SELECT id FROM sandboxes INDEXED BY sandboxes_live_by_snapshot WHERE snapshot = ?1 AND state <> 'deleted' "
    "LIMIT 1";

std::string first_column(const statement& row) { return row.column_text(0); }

}  // namespace

detail::named_statements detail::resource_request_paths() {
  return {
      {"live volumes of all organizations (reconcile)", statements_of(volumes).live_all_orgs},
      {"live snapshots of all organizations (reconcile)", statements_of(snapshots).live_all_orgs},
      {"live volumes of an organization (quotas)", statements_of(volumes).count_live},
      {"live snapshots of an organization (quotas)", statements_of(snapshots).count_live},
      {"a volume's live mounts (volume delete)", volume_mounted_by_sql},
      {"a sandbox's volumes (create, start)", volumes_of_sandbox_sql},
      {"a snapshot's live users (snapshot delete)", snapshot_used_by_sql},
  };
}

// --- volumes ---

result<void> resource_store::insert_volume(const volume_record& v) {
  return detail::insert_named(query(*db_, statements_of(volumes).insert, v.id, v.org_id, v.name, v.docker_name,
                                    v.size_mb, v.state, v.created_at, v.updated_at),
                              volumes.kind, volumes.table, v.name, v.id, v.org_id);
}

result<volume_record> resource_store::get_volume(const std::string& org_id, const std::string& id_or_name) {
  return get_resource(*db_, volumes, org_id, id_or_name);
}

result<std::vector<volume_record>> resource_store::list_volumes(const std::string& org_id,
                                                                const std::string& after_name, std::size_t limit) {
  return list_resources(*db_, volumes, org_id, after_name, limit);
}

result<void> resource_store::set_volume_state(const std::string& org_id, const std::string& id,
                                              const std::string& state, const std::vector<std::string>& from,
                                              const std::string& at) {
  return set_resource_state(*db_, volumes, org_id, id, state, from, at);
}

result<std::optional<std::string>> resource_store::volume_mounted_by(const std::string& volume_id) {
  // Rows of deleted sandboxes are removed by triggers (migration 7); the join keeps the answer
  // right even if one were left.
  return query(*db_, volume_mounted_by_sql, volume_id).first(first_column);
}

result<void> resource_store::insert_sandbox_volume(const std::string& sandbox_id, const std::string& volume_id,
                                                   const std::string& mount_path, bool read_only) {
  return query(*db_,
               "INSERT INTO sandbox_volumes (sandbox_id, volume_id, mount_path, read_only) VALUES (?1, ?2, ?3, ?4)",
               sandbox_id, volume_id, mount_path, read_only)
      .run();
}

result<std::vector<sandbox_volume>> resource_store::list_sandbox_volumes(const std::string& sandbox_id) {
  return query(*db_, volumes_of_sandbox_sql, sandbox_id).rows([](const statement& row) {
    return sandbox_volume{row.column_text(0), row.column_text(1), row.column_text(2),
                          row.column_text(3), row.column_text(4), row.column_int64(5) != 0};
  });
}

result<std::vector<volume_record>> resource_store::list_live_volumes_all_orgs() {
  return query(*db_, statements_of(volumes).live_all_orgs).rows(volumes.read);
}

result<std::int64_t> resource_store::count_live_volumes(const std::string& org_id) {
  return query(*db_, statements_of(volumes).count_live, org_id).count();
}

// --- snapshots ---

result<void> resource_store::insert_snapshot(const snapshot_record& s) {
  return detail::insert_named(query(*db_, statements_of(snapshots).insert, s.id, s.org_id, s.name, s.image_ref,
                                    s.size_bytes, s.source_sandbox_id, s.state, s.created_at, s.updated_at),
                              snapshots.kind, snapshots.table, s.name, s.id, s.org_id);
}

result<snapshot_record> resource_store::get_snapshot(const std::string& org_id, const std::string& id_or_name) {
  return get_resource(*db_, snapshots, org_id, id_or_name);
}

result<std::vector<snapshot_record>> resource_store::list_snapshots(const std::string& org_id,
                                                                    const std::string& after_name, std::size_t limit) {
  return list_resources(*db_, snapshots, org_id, after_name, limit);
}

result<void> resource_store::set_snapshot_state(const std::string& org_id, const std::string& id,
                                                const std::string& state, const std::vector<std::string>& from,
                                                const std::string& at) {
  return set_resource_state(*db_, snapshots, org_id, id, state, from, at);
}

result<std::optional<std::string>> resource_store::snapshot_used_by(const std::string& image_ref) {
  return query(*db_, snapshot_used_by_sql, image_ref).first(first_column);
}

result<std::vector<snapshot_record>> resource_store::list_live_snapshots_all_orgs() {
  return query(*db_, statements_of(snapshots).live_all_orgs).rows(snapshots.read);
}

result<std::int64_t> resource_store::count_live_snapshots(const std::string& org_id) {
  return query(*db_, statements_of(snapshots).count_live, org_id).count();
}

}  // namespace sandfort::store
