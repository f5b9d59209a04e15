// Sandboxes: their rows, and the labels a list filters on.
#include "sandfort/store/sandbox_store.hpp"

#include <atomic>

#include "statement.hpp"

namespace sandfort::store {

using detail::null_if_empty;
using detail::query;
using detail::sql;
using detail::statement;

namespace {

// sandbox_store::generation(): moved before each change is tried, so that a failed or
// rolled-back change costs a cache only a read.
std::atomic<std::uint64_t> sandbox_changes{0};
void sandbox_changing() { sandbox_changes.fetch_add(1, std::memory_order_relaxed); }

// Columns in the order read_sandbox expects.
constexpr const char* sandbox_columns =
    "id, org_id, name, state, snapshot, spec_json, container_id, error_message, created_at, updated_at, "
    "expires_at, proxy_secret_sha256, preview_key, address";

// The same, each prefixed "s." for queries that join another table.
const std::string& sandbox_columns_of_s() {
  static const std::string qualified = [] {
    std::string out = "s.";
    for (const char* c = sandbox_columns; *c != '\0'; ++c) {
      out += *c;
      if (*c == ' ') out += "s.";
    }
    return out;
  }();
  return qualified;
}

sandbox_record read_sandbox(const statement& st) {
  sandbox_record s;
  s.id = st.column_text(0);
  s.org_id = st.column_text(1);
  s.name = st.column_text(2);  // NULL reads as empty: unnamed
  s.state = st.column_text(3);
  s.snapshot = st.column_text(4);
  s.spec_json = st.column_text(5);
  s.container_id = st.column_text(6);
  s.error_message = st.column_text(7);
  s.created_at = st.column_text(8);
  s.updated_at = st.column_text(9);
  s.expires_at = st.column_optional_text(10);
  s.proxy_secret_sha256 = st.column_text(11);
  s.preview_key = st.column_text(12);
  s.address = st.column_text(13);
  return s;
}

// get_sandbox is these two point lookups: `id = ?2 OR name = ?2` in one statement defeats
// both indexes and reads every row the organization ever had.
const std::string& sandbox_by_id_sql() {
  static const std::string q =
      sql("SELECT ", sandbox_columns, " FROM sandboxes WHERE id = ?2 AND org_id = ?1 AND state <> 'deleted'");
  return q;
}
// `state <> 'deleted'` written out as in the partial index sandboxes_live_name, so it applies.
const std::string& sandbox_by_name_sql() {
  static const std::string q =
      sql("SELECT ", sandbox_columns, " FROM sandboxes WHERE org_id = ?1 AND name = ?2 AND state <> 'deleted'");
  return q;
}
const std::string& live_sandbox_by_id_sql() {
  static const std::string q = sql("SELECT ", sandbox_columns, " FROM sandboxes WHERE id = ?1 AND state <> 'deleted'");
  return q;
}
constexpr const char* update_sandbox_sql =
    "UPDATE sandboxes SET state = ?3, container_id = ?4, error_message = ?5, updated_at = ?6, address = ?7, "
    "proxy_secret_sha256 = ?8 WHERE org_id = ?1 AND id = ?2 AND state <> 'deleted'";
constexpr const char* update_sandbox_spec_sql =
    "UPDATE sandboxes SET spec_json = ?3, expires_at = ?4, updated_at = ?5 "
    "WHERE org_id = ?1 AND id = ?2 AND state <> 'deleted'";
// What an organization's quotas count, on every create.
const std::string& live_sandboxes_of_org_sql() {
  static const std::string q = sql("SELECT ", sandbox_columns,
                                   " FROM sandboxes INDEXED BY sandboxes_live_by_org WHERE org_id = ?1 "
                                   "AND state <> 'deleted' ORDER BY id");
  return q;
}
const std::string& live_sandboxes_all_orgs_sql() {
  static const std::string q =
      sql("SELECT ", sandbox_columns,
          " FROM sandboxes INDEXED BY sandboxes_live_by_org WHERE state <> 'deleted' ORDER BY id");
  return q;
}
// Every Prometheus scrape: counted through the live-only partial index, so deleted history
// costs nothing (the rows it names are then read for their state, live ones only).
const std::string& live_sandboxes_by_state_sql() {
  static const std::string q =
      "SELECT state, count(*) FROM sandboxes INDEXED BY sandboxes_live_by_org WHERE state <> 'deleted' "
      "GROUP BY state ORDER BY state";
  return q;
}

constexpr std::size_t max_label_filters = 64;

// Parameters: ?1 org, ?2 state, ?3 cursor, ?4 limit, then each label's key and value from ?5 on.
// Indexes are named, not left to the planner, so a page reads what sandbox_filter promises:
// live rows come from the partial indexes of live rows, and only a list of deleted sandboxes
// reads deleted ones (matching their labels in spec_json: they have none in sandbox_labels).
std::string list_sandboxes_sql(const sandbox_filter& f) {
  auto key = [](std::size_t i) { return "?" + std::to_string(5 + 2 * i); };
  auto value = [](std::size_t i) { return "?" + std::to_string(6 + 2 * i); };
  std::string q = "SELECT " + sandbox_columns_of_s();
  if (f.state == "deleted") {
    q += " FROM sandboxes AS s INDEXED BY sandboxes_by_org WHERE s.org_id = ?1 AND s.state = 'deleted' AND s.id > ?3";
    for (std::size_t i = 0; i < f.labels.size(); ++i)
      q += " AND EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(s.spec_json) THEN s.spec_json ELSE '{}' END, "
           "'$.labels') AS j WHERE j.type = 'text' AND j.key = " +
           key(i) + " AND j.value = " + value(i) + ")";
    return q + " ORDER BY s.id LIMIT ?4";
  }
  const std::string state = f.state.empty() ? "" : " AND s.state = ?2";
  if (f.labels.empty())
    return q + " FROM sandboxes AS s INDEXED BY sandboxes_live_by_org WHERE s.org_id = ?1 AND s.state <> 'deleted'" +
           state + " AND s.id > ?3 ORDER BY s.id LIMIT ?4";
  // The first label's index gives the page in id order; the others are checked by primary key.
  q += " FROM sandbox_labels AS l INDEXED BY sandbox_labels_by_value CROSS JOIN sandboxes AS s"
       " WHERE l.org_id = ?1 AND l.key = ?5 AND l.value = ?6 AND l.sandbox_id > ?3"
       " AND s.id = l.sandbox_id AND s.state <> 'deleted'" +
       state;
  for (std::size_t i = 1; i < f.labels.size(); ++i)
    q += " AND EXISTS (SELECT 1 FROM sandbox_labels AS m WHERE m.sandbox_id = l.sandbox_id AND m.key = " + key(i) +
         " AND m.value = " + value(i) + ")";
  return q + " ORDER BY l.sandbox_id LIMIT ?4";
}

constexpr const char* prune_deleted_sql =
    "DELETE FROM sandboxes WHERE id IN (SELECT id FROM sandboxes INDEXED BY sandboxes_deleted_at "
    "WHERE state = 'deleted' AND updated_at < ?1 ORDER BY updated_at LIMIT ?2)";

// A deleted row is final: changing it is not_found.
result<void> changed_one_sandbox(result<std::int64_t> changed, const std::string& id) {
  if (!changed) return std::move(changed).err();
  if (*changed == 0) return make_error(errc::not_found, "sandbox " + id + " not found");
  return {};
}

}  // namespace

detail::named_statements detail::sandbox_request_paths() {
  auto list = [](std::string state, std::vector<std::pair<std::string, std::string>> labels) {
    sandbox_filter f;
    f.state = std::move(state);
    f.labels = std::move(labels);
    return list_sandboxes_sql(f);
  };
  return {
      {"sandbox by id", sandbox_by_id_sql()},
      {"sandbox by name", sandbox_by_name_sql()},
      {"live sandbox by id (egress proxy, preview router)", live_sandbox_by_id_sql()},
      {"sandbox update", update_sandbox_sql},
      {"sandbox spec update", update_sandbox_spec_sql},
      {"list", list("", {})},
      {"list by state", list("started", {})},
      {"list by label", list("", {{"k", "v"}})},
      {"list by two labels", list("", {{"k", "v"}, {"k2", "v2"}})},
      {"list by state and label", list("started", {{"k", "v"}})},
      {"live sandboxes of an organization (quotas)", live_sandboxes_of_org_sql()},
      {"live sandboxes of all organizations (reaper)", live_sandboxes_all_orgs_sql()},
      {"live sandboxes by state (metrics)", live_sandboxes_by_state_sql()},
  };
}

std::uint64_t sandbox_store::generation() { return sandbox_changes.load(std::memory_order_relaxed); }

result<void> sandbox_store::insert_sandbox(const sandbox_record& s) {
  sandbox_changing();
  return detail::insert_named(
      query(*db_,
            sql("INSERT INTO sandboxes (", sandbox_columns,
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"),
            s.id, s.org_id, null_if_empty{s.name}, s.state, s.snapshot, s.spec_json, s.container_id, s.error_message,
            s.created_at, s.updated_at, s.expires_at, s.proxy_secret_sha256, s.preview_key, s.address),
      "sandbox", "sandboxes", s.name, s.id, s.org_id);
}

result<sandbox_record> sandbox_store::get_sandbox(const std::string& org_id, const std::string& id_or_name) {
  for (const std::string* q : {&sandbox_by_id_sql(), &sandbox_by_name_sql()}) {
    auto row = query(*db_, *q, org_id, id_or_name).first(read_sandbox);
    if (!row) return std::move(row).err();
    if (*row) return std::move(**row);
  }
  return make_error(errc::not_found, "sandbox " + id_or_name + " not found");
}

result<std::vector<sandbox_record>> sandbox_store::list_sandboxes(const std::string& org_id,
                                                                  const sandbox_filter& filter) {
  if (filter.labels.size() > max_label_filters)
    return make_error(errc::invalid_argument, "at most " + std::to_string(max_label_filters) + " label filters, not " +
                                                  std::to_string(filter.labels.size()));
  query q(*db_, list_sandboxes_sql(filter), org_id, filter.state, filter.after_id, filter.limit);
  for (std::size_t i = 0; i < filter.labels.size(); ++i) {
    q.bind(static_cast<int>(5 + 2 * i), filter.labels[i].first);
    q.bind(static_cast<int>(6 + 2 * i), filter.labels[i].second);
  }
  return q.rows(read_sandbox);
}

result<void> sandbox_store::update_sandbox(const sandbox_record& s) {
  sandbox_changing();
  return changed_one_sandbox(query(*db_, update_sandbox_sql, s.org_id, s.id, s.state, s.container_id, s.error_message,
                                   s.updated_at, s.address, s.proxy_secret_sha256)
                                 .changes(),
                             s.id);
}

result<void> sandbox_store::update_sandbox_spec(const sandbox_record& s) {
  sandbox_changing();
  return changed_one_sandbox(
      query(*db_, update_sandbox_spec_sql, s.org_id, s.id, s.spec_json, s.expires_at, s.updated_at).changes(), s.id);
}

result<sandbox_record> sandbox_store::find_live_sandbox(const std::string& id) {
  return query(*db_, live_sandbox_by_id_sql(), id).one(read_sandbox, "sandbox " + id + " not found");
}

result<std::vector<sandbox_record>> sandbox_store::list_live_sandboxes(const std::string& org_id) {
  return query(*db_, live_sandboxes_of_org_sql(), org_id).rows(read_sandbox);
}

result<std::vector<sandbox_record>> sandbox_store::list_live_sandboxes_all_orgs() {
  return query(*db_, live_sandboxes_all_orgs_sql()).rows(read_sandbox);
}

result<std::vector<std::pair<std::string, std::int64_t>>> sandbox_store::count_live_sandboxes_by_state() {
  return query(*db_, live_sandboxes_by_state_sql()).rows([](const statement& row) {
    return std::pair{row.column_text(0), row.column_int64(1)};
  });
}

// --- keeping history bounded ---

result<std::size_t> sandbox_store::prune_deleted_sandboxes(const std::string& deleted_before, std::size_t batch) {
  sandbox_changing();
  auto changed = query(*db_, prune_deleted_sql, deleted_before, batch).changes();
  if (!changed) return std::move(changed).err();
  return static_cast<std::size_t>(*changed);
}

}  // namespace sandfort::store
