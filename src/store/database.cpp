#include "sandfort/store/database.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include "migrations.hpp"
#include "sandfort/core/ids.hpp"
#include "statement.hpp"

namespace sandfort::store {

using detail::statement;

namespace {

// Runs SQL without parameters or rows (pragmas, transaction control, migration scripts).
result<void> exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    std::string text = msg != nullptr ? msg : sqlite3_errmsg(db);
    sqlite3_free(msg);
    return make_error(errc::internal, text);
  }
  return {};
}

// The text of the first column of the first row.
result<std::string> query_text(sqlite3* db, const char* sql) {
  auto st = statement::prepare(db, sql);
  if (!st) return std::move(st).err();
  auto row = st->step();
  if (!row) return std::move(row).err();
  if (!*row) return make_error(errc::not_found, std::string("no row for: ") + sql);
  return st->column_text(0);
}

result<int> user_version(sqlite3* db) {
  auto v = query_text(db, "PRAGMA user_version");
  if (!v) return std::move(v).err();
  return std::stoi(*v);
}

// Each connection's settings; docs/configuration.md ("Store") gives the reasons.
result<void> configure(sqlite3* db) {
  auto mode = query_text(db, "PRAGMA journal_mode=WAL");
  if (!mode) return std::move(mode).err();
  if (*mode != "wal") return make_error(errc::internal, "journal_mode is '" + *mode + "', not 'wal'");
  for (const char* pragma : {"PRAGMA foreign_keys=ON", "PRAGMA busy_timeout=5000", "PRAGMA synchronous=NORMAL",
                             "PRAGMA cache_size=-16384", "PRAGMA temp_store=MEMORY", "PRAGMA wal_autocheckpoint=1000",
                             "PRAGMA journal_size_limit=33554432"}) {
    if (auto r = exec(db, pragma); !r) return r;
  }
  return {};
}

// One transaction per migration. IMMEDIATE takes the write lock first, and the version is read
// again inside it, so two processes opening a fresh file at once do not both apply a step.
result<void> apply(sqlite3* db, const detail::migration& m) {
  if (auto r = exec(db, "BEGIN IMMEDIATE"); !r) return r;
  auto body = [&]() -> result<void> {
    auto current = user_version(db);
    if (!current) return std::move(current).err();
    if (*current >= m.version) return {};
    if (auto r = exec(db, m.sql); !r) return r;
    if (m.then != nullptr) {
      if (auto r = m.then(db); !r) return r;
    }
    return exec(db, ("PRAGMA user_version=" + std::to_string(m.version)).c_str());
  }();
  if (!body) {
    (void)exec(db, "ROLLBACK");
    return make_error(body.err().code, "migration " + std::to_string(m.version) + ": " + body.err().message);
  }
  return exec(db, "COMMIT");
}

result<void> migrate(sqlite3* db) {
  const auto& all = detail::migrations();
  const int latest = all.empty() ? 0 : all.back().version;
  auto current = user_version(db);
  if (!current) return std::move(current).err();
  if (*current > latest)
    return make_error(errc::internal, "schema version " + std::to_string(*current) +
                                          " is newer than this build supports (" + std::to_string(latest) + ")");
  for (const auto& m : all) {
    if (m.version <= *current) continue;
    if (auto r = apply(db, m); !r) return r;
  }
  return {};
}

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

constexpr const char* org_columns = "id, name, superadmin, created_at, state, state_changed_at";

org read_org(const statement& st) {
  return org{st.column_text(0), st.column_text(1), st.column_int64(2) != 0,
             st.column_text(3), st.column_text(4), st.column_optional_text(5)};
}

constexpr const char* key_columns = "id, org_id, name, role, created_at, expires_at, revoked_at, last_used_at";

api_key read_key(const statement& st) {
  return api_key{st.column_text(0),          st.column_text(1),          st.column_text(2),
                 st.column_text(3),          st.column_text(4),          st.column_optional_text(5),
                 st.column_optional_text(6), st.column_optional_text(7)};
}

template <typename T, typename Read>
result<std::vector<T>> collect(statement& st, Read read) {
  std::vector<T> out;
  for (;;) {
    auto row = st.step();
    if (!row) return std::move(row).err();
    if (!*row) return out;
    out.push_back(read(st));
  }
}

template <typename T, typename Read>
result<T> one(statement& st, Read read, const std::string& not_found_message) {
  auto row = st.step();
  if (!row) return std::move(row).err();
  if (!*row) return make_error(errc::not_found, not_found_message);
  return read(st);
}

std::string sql(const char* before, const char* columns, const char* after) {
  return std::string(before) + columns + after;
}

std::int64_t sql_limit(std::size_t limit) {
  constexpr auto max_limit = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(std::min(limit, max_limit));
}

// Columns in the order read_audit_event expects.
constexpr const char* audit_event_columns =
    "org_id, seq, ts, actor, action, target, outcome, request_id, source, details, prev_hash, hash";

audit_event read_audit_event(const statement& st) {
  audit_event e;
  e.org_id = st.column_text(0);
  e.seq = st.column_int64(1);
  e.ts = st.column_text(2);
  e.actor = st.column_text(3);
  e.action = st.column_text(4);
  e.target = st.column_text(5);
  e.outcome = st.column_text(6);
  e.request_id = st.column_text(7);
  e.source = st.column_text(8);
  e.details = st.column_text(9);
  e.prev_hash = st.column_text(10);
  e.hash = st.column_text(11);
  return e;
}

constexpr const char* checkpoint_columns = "org_id, seq, head_hash, ts, key_id, signature";

audit_checkpoint read_checkpoint(const statement& st) {
  return audit_checkpoint{st.column_text(0), st.column_int64(1), st.column_text(2),
                          st.column_text(3), st.column_text(4),  st.column_text(5)};
}

// Named rather than left to the planner, so that a page never reads more than audit_filter
// promises (without statistics the planner may prefer an equality index over the time range);
// a test checks every plan.
const char* audit_index_for(const audit_filter& f) {
  if (!f.since_ts.empty() || !f.until_ts.empty()) return " INDEXED BY audit_by_ts";
  if (!f.target.empty()) return " INDEXED BY audit_by_target";
  if (!f.actor.empty()) return " INDEXED BY audit_by_actor";
  if (!f.action.empty()) return " INDEXED BY audit_by_action";
  return "";  // the primary key: org_id, seq
}

// Only the terms of the filter's non-empty fields, so each is a range or an equality the index
// can seek on; parameters keep their numbers whether used or not.
std::string list_audit_events_sql(const audit_filter& f) {
  std::string q = sql("SELECT ", audit_event_columns, " FROM audit_events");
  q += audit_index_for(f);
  q += " WHERE org_id = ?1 AND seq > ?2";
  if (!f.since_ts.empty()) q += " AND ts >= ?3";
  if (!f.until_ts.empty()) q += " AND ts <= ?4";
  if (!f.actor.empty()) q += " AND actor = ?5";
  if (!f.action.empty()) q += " AND action = ?6";
  if (!f.target.empty()) q += " AND target = ?7";
  q += " ORDER BY seq LIMIT ?8";
  return q;
}

// --- the statements of a request's path (explain_request_paths() shows their plans) ---

const std::string& api_key_by_hash_sql() {
  static const std::string q = sql("SELECT ", key_columns, " FROM api_keys WHERE secret_sha256 = ?1");
  return q;
}
const std::string& org_by_id_sql() {
  static const std::string q = sql("SELECT ", org_columns, " FROM orgs WHERE id = ?1");
  return q;
}
constexpr const char* touch_api_key_sql = "UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1";

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
  static const std::string q = sql("SELECT ", sandbox_columns,
                                   " FROM sandboxes INDEXED BY sandboxes_live_by_org WHERE state <> 'deleted' ORDER BY id");
  return q;
}
constexpr const char* audit_head_sql = "SELECT seq, hash FROM audit_events WHERE org_id = ?1 ORDER BY seq DESC LIMIT 1";
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
           "'$.labels') AS j WHERE j.type = 'text' AND j.key = " + key(i) + " AND j.value = " + value(i) + ")";
    return q + " ORDER BY s.id LIMIT ?4";
  }
  const std::string state = f.state.empty() ? "" : " AND s.state = ?2";
  if (f.labels.empty())
    return q + " FROM sandboxes AS s INDEXED BY sandboxes_live_by_org WHERE s.org_id = ?1 AND s.state <> 'deleted'" +
           state + " AND s.id > ?3 ORDER BY s.id LIMIT ?4";
  // The first label's index gives the page in id order; the others are checked by primary key.
  q += " FROM sandbox_labels AS l INDEXED BY sandbox_labels_by_value CROSS JOIN sandboxes AS s"
       " WHERE l.org_id = ?1 AND l.key = ?5 AND l.value = ?6 AND l.sandbox_id > ?3"
       " AND s.id = l.sandbox_id AND s.state <> 'deleted'" + state;
  for (std::size_t i = 1; i < f.labels.size(); ++i)
    q += " AND EXISTS (SELECT 1 FROM sandbox_labels AS m WHERE m.sandbox_id = l.sandbox_id AND m.key = " + key(i) +
         " AND m.value = " + value(i) + ")";
  return q + " ORDER BY l.sandbox_id LIMIT ?4";
}

constexpr const char* prune_deleted_sql =
    "DELETE FROM sandboxes WHERE id IN (SELECT id FROM sandboxes INDEXED BY sandboxes_deleted_at "
    "WHERE state = 'deleted' AND updated_at < ?1 ORDER BY updated_at LIMIT ?2)";

// Every statement explain_request_paths() shows, by what it is for.
std::vector<std::pair<std::string, std::string>> request_path_statements() {
  auto list = [](std::string state, std::vector<std::pair<std::string, std::string>> labels) {
    sandbox_filter f;
    f.state = std::move(state);
    f.labels = std::move(labels);
    return list_sandboxes_sql(f);
  };
  return {
      {"api key by hash", api_key_by_hash_sql()},
      {"organization by id", org_by_id_sql()},
      {"api key use", touch_api_key_sql},
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
      {"audit chain head", audit_head_sql},
      {"live volumes of all organizations (reconcile)", detail::live_volumes_all_orgs_sql()},
      {"live snapshots of all organizations (reconcile)", detail::live_snapshots_all_orgs_sql()},
      {"live volumes of an organization (quotas)", detail::count_live_volumes_sql()},
      {"live snapshots of an organization (quotas)", detail::count_live_snapshots_sql()},
      {"a volume's live mounts (volume delete)", detail::volume_mounted_by_sql()},
      {"a sandbox's volumes (create, start)", detail::volumes_of_sandbox_sql()},
      {"a snapshot's live users (snapshot delete)", detail::snapshot_used_by_sql()},
  };
}

// Appends the distinct org ids of `table` in order, seeking to the next one each time instead of
// reading every row. An id that does not sort after the previous one (not text: the file was
// edited) would repeat forever, so it ends the walk with an error.
result<void> append_org_ids(sqlite3* db, const char* table, std::vector<std::string>& out) {
  auto first = statement::prepare(db, sql("SELECT org_id FROM ", table, " WHERE org_id >= '' ORDER BY org_id LIMIT 1"));
  if (!first) return std::move(first).err();
  auto next = statement::prepare(db, sql("SELECT org_id FROM ", table, " WHERE org_id > ?1 ORDER BY org_id LIMIT 1"));
  if (!next) return std::move(next).err();
  std::optional<std::string> previous;
  for (statement* st = &*first;; st = &*next) {
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (!*row) return {};
    std::string id = st->column_text(0);
    if (previous && id <= *previous)
      return make_error(errc::internal, std::string(table) + " holds an org_id that is not text");
    st->reset();
    out.push_back(id);
    next->reset();
    next->bind(1, id);
    previous = std::move(id);
  }
}

}  // namespace

void database::set_busy_timeout(std::chrono::milliseconds wait) {
  sqlite3_busy_timeout(db_, static_cast<int>(wait.count()));
}

result<std::unique_ptr<database>> database::open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close(raw);
    return make_error(errc::internal, "open database " + path + ": " + msg);
  }
  sqlite3_extended_result_codes(raw, 1);
  // Owns the handle from here on, so every early return closes it.
  std::unique_ptr<database> db(new database(raw));

  auto fail = [&](const error& e) { return make_error(e.code, "database " + path + ": " + e.message); };
  if (auto r = configure(raw); !r) return fail(r.err());
  if (auto r = migrate(raw); !r) return fail(r.err());
  auto id = query_text(raw, "SELECT value FROM meta WHERE key = 'instance_id'");
  if (!id) return fail(id.err());
  db->instance_id_ = std::move(*id);
  db->path_ = path;
  if (auto size = query_text(raw, "PRAGMA page_size"); size) db->page_size_ = std::stoll(*size);
  sqlite3_wal_hook(raw, &database::on_wal_commit, db.get());
  // Frames left from before (a killed process): the hook only learns of them at the next commit.
  int log = -1, done = -1;
  if (sqlite3_wal_checkpoint_v2(raw, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done) == SQLITE_OK && log > done)
    db->wal_frames_ = log;
  return db;
}

// Enough for every fixed statement and the usual list shapes; rarer shapes are compiled per use.
constexpr std::size_t statement_cache_capacity = 128;

database::database(sqlite3* db)
    : db_(db), statements_(std::make_unique<detail::statement_cache>(db, stats_, statement_cache_capacity)) {}

database::~database() {
  statements_.reset();  // finalized before the connection closes
  sqlite3_close_v2(db_);
}

result<statement> database::prepare(std::string_view sql) {
  // SQLite rolls a whole transaction back after some errors (a full disk at a cache spill, I/O);
  // a statement run now would stand alone, so a change could be stored without its audit event.
  if (in_transaction_ && sqlite3_get_autocommit(db_) != 0) return rolled_back_error();
  return statements_->get(sql);
}

error database::rolled_back_error() const {
  if (stats_.disk_full > disk_full_at_begin_)
    return make_error(errc::insufficient_storage,
                      "the state directory's disk is full: the transaction was rolled back, nothing of it was "
                      "stored; retry once space is freed");
  return make_error(errc::internal, "the transaction was rolled back after an earlier error");
}

int database::schema_version() const {
  auto v = user_version(db_);
  return v ? *v : -1;
}

result<void> database::ping() {
  auto v = query_text(db_, "SELECT 1");
  if (!v) return std::move(v).err();
  return {};
}

// --- organizations ---

result<org> database::create_org(const std::string& name, bool superadmin, const std::string& created_at) {
  auto st = prepare("INSERT INTO orgs (id, name, superadmin, created_at) VALUES (?1, ?2, ?3, ?4)");
  if (!st) return std::move(st).err();
  org o{new_id("org-"), name, superadmin, created_at, "active", std::nullopt};
  st->bind(1, o.id);
  st->bind(2, o.name);
  st->bind(3, std::int64_t{superadmin ? 1 : 0});
  st->bind(4, o.created_at);
  if (auto r = st->run(); !r) {
    if (r.err().code == errc::conflict) return make_error(errc::conflict, "organization name '" + name + "' is taken");
    return std::move(r).err();
  }
  return o;
}

result<org> database::get_org(const std::string& id) {
  auto st = prepare(org_by_id_sql());
  if (!st) return std::move(st).err();
  st->bind(1, id);
  return one<org>(*st, read_org, "organization " + id + " not found");
}

result<org> database::find_org_by_name(const std::string& name) {
  auto st = prepare(sql("SELECT ", org_columns, " FROM orgs WHERE name = ?1"));
  if (!st) return std::move(st).err();
  st->bind(1, name);
  return one<org>(*st, read_org, "organization '" + name + "' not found");
}

result<std::vector<org>> database::list_orgs() {
  auto st = prepare(sql("SELECT ", org_columns, " FROM orgs WHERE state <> 'deleted' ORDER BY name"));
  if (!st) return std::move(st).err();
  return collect<org>(*st, read_org);
}

result<void> database::set_org_state(const std::string& id, const std::string& state,
                                     const std::vector<std::string>& from, const std::string& at) {
  auto current = get_org(id);
  if (!current) return std::move(current).err();
  if (std::find(from.begin(), from.end(), current->state) == from.end())
    return make_error(errc::conflict, "organization " + id + " is " + current->state);
  auto st = prepare("UPDATE orgs SET state = ?2, state_changed_at = ?3 WHERE id = ?1 AND state = ?4");
  if (!st) return std::move(st).err();
  st->bind(1, id);
  st->bind(2, state);
  st->bind(3, at);
  st->bind(4, current->state);
  if (auto r = st->run(); !r) return r;
  if (sqlite3_changes(db_) == 0) return make_error(errc::conflict, "organization " + id + " changed meanwhile");
  return {};
}

result<int> database::revoke_org_keys(const std::string& org_id, const std::string& revoked_at) {
  auto st = prepare("UPDATE api_keys SET revoked_at = ?2 WHERE org_id = ?1 AND revoked_at IS NULL");
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  st->bind(2, revoked_at);
  if (auto r = st->run(); !r) return std::move(r).err();
  return sqlite3_changes(db_);
}

// --- API keys ---

result<void> database::insert_api_key(const api_key& key, const std::string& secret_sha256_hex) {
  auto st = prepare(
                               "INSERT INTO api_keys (id, org_id, name, role, secret_sha256, created_at, expires_at) "
                               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!st) return std::move(st).err();
  st->bind(1, key.id);
  st->bind(2, key.org_id);
  st->bind(3, key.name);
  st->bind(4, key.role);
  st->bind(5, secret_sha256_hex);
  st->bind(6, key.created_at);
  st->bind(7, key.expires_at);
  if (auto r = st->run(); !r) {
    if (r.err().code == errc::conflict) return make_error(errc::conflict, "API key " + key.id + " already exists");
    if (r.err().code == errc::not_found) return make_error(errc::not_found, "organization " + key.org_id + " not found");
    return r;
  }
  return {};
}

result<api_key> database::find_api_key_by_hash(const std::string& secret_sha256_hex) {
  auto st = prepare(api_key_by_hash_sql());
  if (!st) return std::move(st).err();
  st->bind(1, secret_sha256_hex);
  return one<api_key>(*st, read_key, "API key not found");
}

result<std::vector<api_key>> database::list_api_keys(const std::string& org_id) {
  auto st = prepare(sql("SELECT ", key_columns, " FROM api_keys WHERE org_id = ?1 ORDER BY id"));
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  return collect<api_key>(*st, read_key);
}

result<std::int64_t> database::count_working_api_keys(const std::string& org_id, const std::string& now) {
  // Times are fixed-width UTC text (format_time): compared as text they compare as times.
  auto st = prepare(
      "SELECT count(*) FROM api_keys WHERE org_id = ?1 AND revoked_at IS NULL AND "
      "(expires_at IS NULL OR expires_at > ?2)");
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  st->bind(2, now);
  auto row = st->step();
  if (!row) return std::move(row).err();
  if (!*row) return std::int64_t{0};
  return st->column_int64(0);
}

result<void> database::revoke_api_key(const std::string& org_id, const std::string& key_id,
                                      const std::string& revoked_at) {
  auto st = prepare(
      "UPDATE api_keys SET revoked_at = ?3 WHERE org_id = ?1 AND id = ?2 AND revoked_at IS NULL");
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  st->bind(2, key_id);
  st->bind(3, revoked_at);
  if (auto r = st->run(); !r) return r;
  if (sqlite3_changes(db_) == 0) return make_error(errc::not_found, "API key " + key_id + " not found");
  return {};
}

result<void> database::touch_api_key(const std::string& key_id, const std::string& used_at) {
  auto st = prepare(touch_api_key_sql);
  if (!st) return std::move(st).err();
  st->bind(1, key_id);
  st->bind(2, used_at);
  return st->run();
}

// --- sandboxes ---

result<void> database::insert_sandbox(const sandbox_record& s) {
  auto st = prepare(sql("INSERT INTO sandboxes (", sandbox_columns,
                                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
  if (!st) return std::move(st).err();
  st->bind(1, s.id);
  st->bind(2, s.org_id);
  st->bind_text_or_null(3, s.name);
  st->bind(4, s.state);
  st->bind(5, s.snapshot);
  st->bind(6, s.spec_json);
  st->bind(7, s.container_id);
  st->bind(8, s.error_message);
  st->bind(9, s.created_at);
  st->bind(10, s.updated_at);
  st->bind(11, s.expires_at);
  st->bind(12, s.proxy_secret_sha256);
  st->bind(13, s.preview_key);
  st->bind(14, s.address);
  return detail::insert_named(*st, "sandbox", "sandboxes", s.name, s.id, s.org_id);
}

result<sandbox_record> database::get_sandbox(const std::string& org_id, const std::string& id_or_name) {
  for (const std::string* q : {&sandbox_by_id_sql(), &sandbox_by_name_sql()}) {
    auto st = prepare(*q);
    if (!st) return std::move(st).err();
    st->bind(1, org_id);
    st->bind(2, id_or_name);
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (*row) return read_sandbox(*st);
  }
  return make_error(errc::not_found, "sandbox " + id_or_name + " not found");
}

result<std::vector<sandbox_record>> database::list_sandboxes(const std::string& org_id,
                                                             const sandbox_filter& filter) {
  if (filter.labels.size() > max_label_filters)
    return make_error(errc::invalid_argument,
                      "at most " + std::to_string(max_label_filters) + " label filters, not " +
                          std::to_string(filter.labels.size()));
  auto st = prepare(list_sandboxes_sql(filter));
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  st->bind(2, filter.state);
  st->bind(3, filter.after_id);
  st->bind(4, sql_limit(filter.limit));
  for (std::size_t i = 0; i < filter.labels.size(); ++i) {
    st->bind(static_cast<int>(5 + 2 * i), filter.labels[i].first);
    st->bind(static_cast<int>(6 + 2 * i), filter.labels[i].second);
  }
  return collect<sandbox_record>(*st, read_sandbox);
}

result<void> database::update_sandbox(const sandbox_record& s) {
  auto st = prepare(update_sandbox_sql);
  if (!st) return std::move(st).err();
  st->bind(1, s.org_id);
  st->bind(2, s.id);
  st->bind(3, s.state);
  st->bind(4, s.container_id);
  st->bind(5, s.error_message);
  st->bind(6, s.updated_at);
  st->bind(7, s.address);
  st->bind(8, s.proxy_secret_sha256);
  if (auto r = st->run(); !r) return r;
  if (sqlite3_changes(db_) == 0) return make_error(errc::not_found, "sandbox " + s.id + " not found");
  return {};
}

result<void> database::update_sandbox_spec(const sandbox_record& s) {
  auto st = prepare(update_sandbox_spec_sql);
  if (!st) return std::move(st).err();
  st->bind(1, s.org_id);
  st->bind(2, s.id);
  st->bind(3, s.spec_json);
  st->bind(4, s.expires_at);
  st->bind(5, s.updated_at);
  if (auto r = st->run(); !r) return r;
  if (sqlite3_changes(db_) == 0) return make_error(errc::not_found, "sandbox " + s.id + " not found");
  return {};
}

result<sandbox_record> database::find_live_sandbox(const std::string& id) {
  auto st = prepare(live_sandbox_by_id_sql());
  if (!st) return std::move(st).err();
  st->bind(1, id);
  return one<sandbox_record>(*st, read_sandbox, "sandbox " + id + " not found");
}

result<std::vector<sandbox_record>> database::list_live_sandboxes(const std::string& org_id) {
  auto st = prepare(live_sandboxes_of_org_sql());
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  return collect<sandbox_record>(*st, read_sandbox);
}

result<std::vector<sandbox_record>> database::list_live_sandboxes_all_orgs() {
  auto st = prepare(live_sandboxes_all_orgs_sql());
  if (!st) return std::move(st).err();
  return collect<sandbox_record>(*st, read_sandbox);
}

result<std::vector<std::pair<std::string, std::int64_t>>> database::count_live_sandboxes_by_state() {
  auto st = prepare(live_sandboxes_by_state_sql());
  if (!st) return std::move(st).err();
  return collect<std::pair<std::string, std::int64_t>>(
      *st, [](const statement& row) { return std::pair{row.column_text(0), row.column_int64(1)}; });
}

// --- keeping history bounded ---

result<std::size_t> database::prune_deleted_sandboxes(const std::string& deleted_before, std::size_t batch) {
  auto st = prepare(prune_deleted_sql);
  if (!st) return std::move(st).err();
  st->bind(1, deleted_before);
  st->bind(2, sql_limit(batch));
  if (auto r = st->run(); !r) return std::move(r).err();
  return static_cast<std::size_t>(sqlite3_changes(db_));
}

result<wal_checkpoint> database::checkpoint_wal() {
  wal_checkpoint out;
  int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_RESTART, &out.log_frames,
                                     &out.checkpointed_frames);
  if (rc == SQLITE_BUSY) {
    out.busy = true;
  } else if ((rc & 0xff) == SQLITE_FULL) {
    // The database file cannot grow: the frames stay in the WAL (readers see them there).
    ++stats_.disk_full;
    return detail::disk_full_error(db_);
  } else if (rc != SQLITE_OK) {
    return detail::sqlite_error(db_, "wal checkpoint");
  }
  if (!out.busy && out.log_frames == out.checkpointed_frames) wal_frames_ = 0;  // the next write starts at the top
  return out;
}

// --- the state directory's disk ---

int database::on_wal_commit(void* self, sqlite3* db, const char* name, int frames) {
  auto* d = static_cast<database*>(self);
  d->wal_frames_ = frames;
  // What sqlite3_wal_autocheckpoint(1000) did before this hook replaced it (its errors are
  // ignored as SQLite ignores them: the commit stands, the frames stay in the WAL).
  if (frames >= 1000) {
    int log = -1, done = -1;
    if (sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, &log, &done) == SQLITE_OK && log == done)
      d->wal_frames_ = 0;
  }
  return SQLITE_OK;
}

result<void> database::set_space_policy(const space_policy& p) {
  space_ = p;
  // After a burst SQLite cuts the WAL back to journal_size_limit: never below the reserve.
  const std::int64_t limit = std::max<std::int64_t>(32ll << 20, p.reserve_bytes);
  if (auto r = exec(db_, ("PRAGMA journal_size_limit=" + std::to_string(limit)).c_str()); !r) return r;
  return keep_reserve();
}

std::int64_t database::reserve_frames_left() {
  struct stat st {};
  if (::stat((path_ + "-wal").c_str(), &st) != 0) return 0;
  const std::int64_t wal_header = 32, frame = page_size_ + 24;
  const std::int64_t frames = st.st_size > wal_header ? (st.st_size - wal_header) / frame : 0;
  return std::max<std::int64_t>(0, frames - wal_frames_);
}

result<void> database::keep_reserve() {
  if (space_.reserve_bytes <= 0 || path_.empty()) return {};
  const std::string wal = path_ + "-wal";
  struct stat st {};
  if (::stat(wal.c_str(), &st) == 0 && st.st_size >= space_.reserve_bytes) return {};
  auto tx = begin();  // the write lock: no other connection appends frames while we extend
  if (!tx) return std::move(tx).err();
  const int fd = ::open(wal.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return make_error(errc::internal, "store: cannot open " + wal + ": " + std::strerror(errno));
  // Zeros past the last frame are no frame to SQLite (their salt never matches the header's).
  // Written, not fallocated: a later write then converts nothing and needs no block.
  static const std::string zeros(64 << 10, '\0');
  int failed = 0;
  off_t at = ::lseek(fd, 0, SEEK_END);
  while (at >= 0 && at < space_.reserve_bytes && failed == 0) {
    const auto n = ::pwrite(fd, zeros.data(), static_cast<std::size_t>(std::min<std::int64_t>(
                                                   static_cast<std::int64_t>(zeros.size()), space_.reserve_bytes - at)),
                            at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) failed = n < 0 ? errno : ENOSPC;
    else at += n;
  }
  if (failed == 0 && ::fdatasync(fd) != 0) failed = errno;
  ::close(fd);
  if (failed == ENOSPC || failed == EDQUOT) {
    ++stats_.disk_full;
    return make_error(errc::insufficient_storage, "the state directory's disk has no room for the store's reserve (" +
                                                      std::to_string(space_.reserve_bytes >> 20) + " MiB)");
  }
  if (failed != 0) return make_error(errc::internal, "store: cannot write " + wal + ": " + std::strerror(failed));
  return {};
}

disk_space database::space() {
  disk_space out;
  struct statvfs vfs {};
  const auto dir = std::filesystem::path(path_).parent_path();
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &vfs) == 0)
    out.free_bytes = static_cast<std::int64_t>(vfs.f_bavail) * static_cast<std::int64_t>(vfs.f_frsize);
  if (stats_.disk_full > disk_full_seen_) {
    disk_full_seen_ = stats_.disk_full;
    short_of_space_ = true;
  }
  if (out.free_bytes >= 0 && out.free_bytes < space_.min_free_bytes) {
    out.full = true;
    out.reason = std::to_string(out.free_bytes >> 20) + " MiB free, below store.min_free_mb (" +
                 std::to_string(space_.min_free_bytes >> 20) + ")";
  } else if (short_of_space_) {
    // Space is back by statvfs: proven by writing the reserve again (a failure counts anew).
    if (!in_transaction_ && keep_reserve()) {
      short_of_space_ = false;
      disk_full_seen_ = stats_.disk_full;
    } else {
      out.full = true;
      out.reason = "a write to the database failed for lack of space";
    }
  }
  return out;
}

result<void> database::admit(write_kind kind) {
  auto s = space();
  if (!s.full) return {};
  if (kind == write_kind::relief) {
    if (reserve_frames_left() >= relief_frames) return {};
    return make_error(errc::insufficient_storage,
                      "the state directory's disk is full (" + s.reason +
                          ") and the store's reserve for deletes is used up: nothing was changed; free space on "
                          "that filesystem and retry");
  }
  return make_error(errc::insufficient_storage,
                    "the state directory's disk is full (" + s.reason +
                        "): nothing was changed; reads, deletes and stops still work, retry once space is freed");
}

// --- for tests and benchmarks ---

result<std::vector<std::string>> database::explain(const std::string& sql_text) {
  auto st = statement::prepare(db_, "EXPLAIN QUERY PLAN " + sql_text);
  if (!st) return std::move(st).err();
  return collect<std::string>(*st, [](const statement& row) { return row.column_text(3); });
}

result<std::vector<statement_plan>> database::explain_request_paths() {
  std::vector<statement_plan> out;
  for (auto& [name, text] : request_path_statements()) {
    auto steps = explain(text);
    if (!steps) return make_error(steps.err().code, name + ": " + steps.err().message);
    out.push_back({name, std::move(*steps)});
  }
  return out;
}

result<void> database::set_max_page_count(std::int64_t pages) {
  return exec(db_, ("PRAGMA max_page_count=" + std::to_string(pages)).c_str());
}

result<std::int64_t> database::page_count() {
  auto n = query_text(db_, "PRAGMA page_count");
  if (!n) return std::move(n).err();
  return std::stoll(*n);
}

// --- transactions ---

transaction::transaction(transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

transaction::~transaction() {
  if (db_ != nullptr) (void)db_->end_transaction(false);
}

result<void> transaction::commit() {
  if (db_ == nullptr) return make_error(errc::internal, "commit of a transaction that is not open");
  auto r = db_->end_transaction(true);
  // Over either way, unless COMMIT itself failed: then the destructor rolls back.
  if (!db_->in_transaction_) db_ = nullptr;
  return r;
}

result<transaction> database::begin() {
  if (in_transaction_) return make_error(errc::internal, "a transaction is already open on this connection");
  auto st = prepare("BEGIN IMMEDIATE");
  if (!st) return std::move(st).err();
  if (auto r = st->run(); !r) return std::move(r).err();
  in_transaction_ = true;
  disk_full_at_begin_ = stats_.disk_full;
  return transaction(*this);
}

result<void> database::end_transaction(bool commit) {
  // After some errors (disk full, I/O) SQLite has already rolled back; later statements then ran
  // on their own, so the changes are not one unit any more and committing must not claim they are.
  if (sqlite3_get_autocommit(db_) != 0) {
    in_transaction_ = false;
    if (commit) return rolled_back_error();
    return {};
  }
  auto st = prepare(commit ? "COMMIT" : "ROLLBACK");
  auto r = st ? st->run() : result<void>(std::move(st).err());
  // A failed ROLLBACK is not retried: nothing better is left to do than to report it.
  if (r || !commit) in_transaction_ = false;
  return r;
}

// --- audit chain ---

result<audit_head> database::audit_head_of(const std::string& org_id) {
  auto st = prepare(audit_head_sql);
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  auto row = st->step();
  if (!row) return std::move(row).err();
  if (!*row) return audit_head{};
  return audit_head{st->column_int64(0), st->column_text(1)};
}

result<void> database::insert_audit_event(const audit_event& e) {
  if (e.seq < 1) return make_error(errc::invalid_argument, "audit seq must be at least 1, not " + std::to_string(e.seq));
  auto st = prepare(sql("INSERT INTO audit_events (", audit_event_columns,
                                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"));
  if (!st) return std::move(st).err();
  st->bind(1, e.org_id);
  st->bind(2, e.seq);
  st->bind(3, e.ts);
  st->bind(4, e.actor);
  st->bind(5, e.action);
  st->bind(6, e.target);
  st->bind(7, e.outcome);
  st->bind(8, e.request_id);
  st->bind(9, e.source);
  st->bind(10, e.details);
  st->bind(11, e.prev_hash);
  st->bind(12, e.hash);
  if (auto r = st->run(); !r) {
    if (r.err().code == errc::conflict)
      return make_error(errc::conflict,
                        "audit event " + std::to_string(e.seq) + " of " + e.org_id + " already exists");
    return r;
  }
  return {};
}

result<std::vector<audit_event>> database::list_audit_events(const std::string& org_id, const audit_filter& f) {
  auto st = prepare(list_audit_events_sql(f));
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  st->bind(2, f.after_seq);
  st->bind(3, f.since_ts);
  st->bind(4, f.until_ts);
  st->bind(5, f.actor);
  st->bind(6, f.action);
  st->bind(7, f.target);
  st->bind(8, sql_limit(f.limit));
  return collect<audit_event>(*st, read_audit_event);
}

result<void> database::scan_audit_events(const std::string& org_id, std::int64_t from_seq,
                                         const std::function<bool(const audit_event&)>& each) {
  auto st = prepare(
      sql("SELECT ", audit_event_columns, " FROM audit_events WHERE org_id = ?1 AND seq >= ?2 ORDER BY seq"));
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  st->bind(2, from_seq);
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).err();
    if (!*row || !each(read_audit_event(*st))) return {};
  }
}

result<std::vector<std::string>> database::audit_org_ids() {
  std::vector<std::string> ids;
  if (auto r = append_org_ids(db_, "audit_events", ids); !r) return std::move(r).err();
  if (auto r = append_org_ids(db_, "audit_checkpoints", ids); !r) return std::move(r).err();
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

result<void> database::insert_audit_checkpoint(const audit_checkpoint& c) {
  auto st = prepare(sql("INSERT INTO audit_checkpoints (", checkpoint_columns,
                                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  if (!st) return std::move(st).err();
  st->bind(1, c.org_id);
  st->bind(2, c.seq);
  st->bind(3, c.head_hash);
  st->bind(4, c.ts);
  st->bind(5, c.key_id);
  st->bind(6, c.signature);
  if (auto r = st->run(); !r) {
    if (r.err().code == errc::conflict)
      return make_error(errc::conflict,
                        "a checkpoint at " + std::to_string(c.seq) + " of " + c.org_id + " already exists");
    return r;
  }
  return {};
}

result<std::optional<audit_checkpoint>> database::latest_audit_checkpoint(const std::string& org_id) {
  auto st = prepare(
      sql("SELECT ", checkpoint_columns, " FROM audit_checkpoints WHERE org_id = ?1 ORDER BY seq DESC LIMIT 1"));
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  auto row = st->step();
  if (!row) return std::move(row).err();
  if (!*row) return std::optional<audit_checkpoint>();
  return std::optional<audit_checkpoint>(read_checkpoint(*st));
}

result<std::vector<audit_checkpoint>> database::list_audit_checkpoints(const std::string& org_id,
                                                                       std::int64_t after_seq, std::size_t limit) {
  auto st = prepare(sql("SELECT ", checkpoint_columns,
                                        " FROM audit_checkpoints WHERE org_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"));
  if (!st) return std::move(st).err();
  st->bind(1, org_id);
  st->bind(2, after_seq);
  st->bind(3, sql_limit(limit));
  return collect<audit_checkpoint>(*st, read_checkpoint);
}

}  // namespace sandfort::store
