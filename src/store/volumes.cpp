// Volumes: an organization's named volumes and the sandboxes that mount them.
#include "sandfort/store/database.hpp"

#include <algorithm>

#include "statement.hpp"

namespace sandfort::store {

using detail::statement;

namespace {

constexpr const char* volume_columns = "id, org_id, name, docker_name, size_mb, state, created_at, updated_at";

volume_record read_volume(const statement& st) {
  volume_record v;
  v.id = st.column_text(0);
  v.org_id = st.column_text(1);
  v.name = st.column_text(2);
  v.docker_name = st.column_text(3);
  if (st.column_optional_text(4)) v.size_mb = st.column_int64(4);
  v.state = st.column_text(5);
  v.created_at = st.column_text(6);
  v.updated_at = st.column_text(7);
  return v;
}

}  // namespace

const std::string& detail::live_volumes_all_orgs_sql() {
  static const std::string q = std::string("SELECT ") + volume_columns +
                               " FROM volumes INDEXED BY volumes_live_name WHERE state <> 'deleted'";
  return q;
}

// The volume quota's count (guardrails): the organization's entries of the live-only index, so
// deleted rows, however many, are never read.
const std::string& detail::volume_mounted_by_sql() {
  static const std::string q =
      "SELECT sv.sandbox_id FROM sandbox_volumes AS sv INDEXED BY sandbox_volumes_by_volume "
      "JOIN sandboxes AS s ON s.id = sv.sandbox_id WHERE sv.volume_id = ?1 AND s.state <> 'deleted' LIMIT 1";
  return q;
}

const std::string& detail::volumes_of_sandbox_sql() {
  static const std::string q =
      "SELECT sv.sandbox_id, sv.volume_id, v.name, v.docker_name, sv.mount_path, sv.read_only "
      "FROM sandbox_volumes AS sv JOIN volumes AS v ON v.id = sv.volume_id WHERE sv.sandbox_id = ?1 "
      "ORDER BY sv.mount_path";
  return q;
}

const std::string& detail::count_live_volumes_sql() {
  static const std::string q =
      "SELECT count(*) FROM volumes INDEXED BY volumes_live_name WHERE org_id = ?1 AND state <> 'deleted'";
  return q;
}

result<void> database::insert_volume(const volume_record& v) {
  auto st = prepare(std::string("INSERT INTO volumes (") + volume_columns +
                    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  if (!st) return std::move(st).err();
  st->bind(1, v.id);
  st->bind(2, v.org_id);
  st->bind(3, v.name);
  st->bind(4, v.docker_name);
  if (v.size_mb) st->bind(5, *v.size_mb);
  else st->bind_null(5);
  st->bind(6, v.state);
  st->bind(7, v.created_at);
  st->bind(8, v.updated_at);
  return detail::insert_named(*st, "volume", "volumes", v.name, v.id, v.org_id);
}

result<volume_record> database::get_volume(const std::string& org_id, const std::string& id_or_name) {
  // Two lookups, each on its own index: the primary key, then the live name.
  static const std::string by_id =
      std::string("SELECT ") + volume_columns + " FROM volumes WHERE id = ?2 AND org_id = ?1 AND state <> 'deleted'";
  static const std::string by_name =
      std::string("SELECT ") + volume_columns + " FROM volumes WHERE org_id = ?1 AND name = ?2 AND state <> 'deleted'";
  for (const std::string* q : {&by_id, &by_name}) {
    auto st = prepare(*q);
    if (!st) return std::move(st).err();
    st->bind(1, org_id);
    st->bind(2, id_or_name);
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (*row) return read_volume(*st);
  }
  return make_error(errc::not_found, "volume " + id_or_name + " not found");
}

result<std::vector<volume_record>> database::list_volumes(const std::string& org_id, const std::string& after_name,
                                                          std::size_t limit) {
  auto st = prepare(std::string("SELECT ") + volume_columns +
                    " FROM volumes INDEXED BY volumes_live_name WHERE org_id = ?1 AND name > ?2 AND state <> 'deleted' "
                    "ORDER BY name LIMIT ?3");
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  st->bind(2, after_name);
  st->bind(3, static_cast<std::int64_t>(std::min<std::size_t>(limit, 100'000)));
  std::vector<volume_record> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (!*row) return out;
    out.push_back(read_volume(*st));
  }
}

result<void> database::set_volume_state(const std::string& org_id, const std::string& id, const std::string& state,
                                        const std::vector<std::string>& from, const std::string& at) {
  auto current = get_volume(org_id, id);
  if (!current) return std::move(current).err();
  if (current->id != id) return make_error(errc::not_found, "volume " + id + " not found");
  if (std::find(from.begin(), from.end(), current->state) == from.end())
    return make_error(errc::conflict, "volume " + current->name + " is " + current->state);
  auto st = prepare("UPDATE volumes SET state = ?3, updated_at = ?4 WHERE id = ?1 AND org_id = ?2 AND state = ?5");
  if (!st) return std::move(st).err();
  st->bind(1, id);
  st->bind(2, org_id);
  st->bind(3, state);
  st->bind(4, at);
  st->bind(5, current->state);
  return st->run();
}

result<std::optional<std::string>> database::volume_mounted_by(const std::string& volume_id) {
  // Rows of deleted sandboxes are removed by triggers (migration 7); the join keeps the answer
  // right even if one were left.
  auto st = prepare(detail::volume_mounted_by_sql());
  if (!st) return std::move(st).err();
  st->bind(1, volume_id);
  auto row = st->step();
  if (!row) return std::move(row).err();
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(st->column_text(0));
}

result<void> database::insert_sandbox_volume(const std::string& sandbox_id, const std::string& volume_id,
                                             const std::string& mount_path, bool read_only) {
  auto st = prepare("INSERT INTO sandbox_volumes (sandbox_id, volume_id, mount_path, read_only) VALUES (?1, ?2, ?3, ?4)");
  if (!st) return std::move(st).err();
  st->bind(1, sandbox_id);
  st->bind(2, volume_id);
  st->bind(3, mount_path);
  st->bind(4, std::int64_t{read_only ? 1 : 0});
  return st->run();
}

result<std::vector<sandbox_volume>> database::list_sandbox_volumes(const std::string& sandbox_id) {
  auto st = prepare(detail::volumes_of_sandbox_sql());
  if (!st) return std::move(st).err();
  st->bind(1, sandbox_id);
  std::vector<sandbox_volume> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (!*row) return out;
    out.push_back(sandbox_volume{st->column_text(0), st->column_text(1), st->column_text(2), st->column_text(3),
                                 st->column_text(4), st->column_int64(5) != 0});
  }
}

result<std::vector<volume_record>> database::list_live_volumes_all_orgs() {
  auto st = prepare(detail::live_volumes_all_orgs_sql());
  if (!st) return std::move(st).err();
  std::vector<volume_record> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (!*row) return out;
    out.push_back(read_volume(*st));
  }
}

result<std::int64_t> database::count_live_volumes(const std::string& org_id) {
  auto st = prepare(detail::count_live_volumes_sql());
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  auto row = st->step();
  if (!row) return std::move(row).err();
  if (!*row) return std::int64_t{0};
  return st->column_int64(0);
}

}  // namespace sandfort::store
