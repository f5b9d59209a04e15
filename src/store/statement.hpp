#pragma once
// A prepared SQLite statement that finalizes itself, or, when it came from a connection's
// statement_cache, goes back to it reset. Binding errors are remembered and reported by the next
// step(), so call sites read as a straight sequence of binds.

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::store::detail {

// An error of class internal carrying SQLite's message for the connection.
inline error sqlite_error(sqlite3* db, std::string_view what) {
  return make_error(errc::internal, std::string(what) + ": " + sqlite3_errmsg(db));
}

// What a write refused for lack of disk space says (SQLITE_FULL): SQLite undid the statement, or
// the whole transaction when it failed at COMMIT, so nothing of the change was stored.
inline error disk_full_error(sqlite3* db) {
  return make_error(errc::insufficient_storage,
                    std::string("the state directory's disk is full (") + sqlite3_errmsg(db) +
                        "): the change was not made; reads, deletes and stops still work, retry once space is freed");
}

// Constraint failures get their own class so callers can word them for the user:
// UNIQUE and PRIMARY KEY → conflict, FOREIGN KEY → not_found; a full disk → insufficient_storage.
// Everything else is internal.
inline error classify_step_error(sqlite3* db) {
  if ((sqlite3_errcode(db) & 0xff) == SQLITE_FULL) return disk_full_error(db);
  // Another process holds the write lock longer than the connection waits (busy timeout).
  if (sqlite3_errcode(db) == SQLITE_BUSY)
    return make_error(errc::unavailable, std::string("the database is busy: ") + sqlite3_errmsg(db) + "; retry");
  switch (sqlite3_extended_errcode(db)) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
      return make_error(errc::conflict, sqlite3_errmsg(db));
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return make_error(errc::not_found, sqlite3_errmsg(db));
    default:
      return sqlite_error(db, "sqlite step");
  }
}

// Compiles sql; `flags` as for sqlite3_prepare_v3.
inline result<sqlite3_stmt*> compile(sqlite3* db, std::string_view sql, unsigned flags) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), flags, &raw, nullptr) != SQLITE_OK) {
    sqlite3_finalize(raw);
    return sqlite_error(db, "sqlite prepare");
  }
  return raw;
}

class statement {
 public:
  // A statement of its own, finalized when done; its work is added to `stats` when given.
  static result<statement> prepare(sqlite3* db, std::string_view sql, statement_stats* stats = nullptr) {
    auto raw = compile(db, sql, 0);
    if (!raw) return std::move(raw).err();
    if (stats != nullptr) ++stats->prepared;
    return statement(db, *raw, stats, nullptr);
  }

  statement(statement&& other) noexcept
      : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), stats_(other.stats_), lent_(other.lent_),
        bind_rc_(other.bind_rc_) {}
  statement& operator=(statement&&) = delete;
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;
  ~statement() { release(); }

  // Indexes start at 1, as in SQLite.
  void bind(int index, std::string_view text) {
    note(sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT));
  }
  void bind(int index, const char* text) { bind(index, std::string_view(text)); }
  void bind(int index, const std::string& text) { bind(index, std::string_view(text)); }
  void bind(int index, std::int64_t value) { note(sqlite3_bind_int64(stmt_, index, value)); }
  void bind_null(int index) { note(sqlite3_bind_null(stmt_, index)); }
  void bind(int index, const std::optional<std::string>& text) {
    if (text) bind(index, std::string_view(*text));
    else bind_null(index);
  }
  // Empty text is stored as NULL (unnamed sandboxes).
  void bind_text_or_null(int index, const std::string& text) {
    if (text.empty()) bind_null(index);
    else bind(index, std::string_view(text));
  }

  // true: a row is available; false: done.
  result<bool> step() {
    if (bind_rc_ != SQLITE_OK) return make_error(errc::internal, std::string("sqlite bind: ") + sqlite3_errstr(bind_rc_));
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    if ((rc & 0xff) == SQLITE_FULL && stats_ != nullptr) ++stats_->disk_full;
    return classify_step_error(db_);
  }

  // Runs a statement that returns no rows.
  result<void> run() {
    auto r = step();
    if (!r) return std::move(r).err();
    return {};
  }

  std::string column_text(int index) const {
    const unsigned char* p = sqlite3_column_text(stmt_, index);
    if (p == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, index)));
  }
  std::optional<std::string> column_optional_text(int index) const {
    if (sqlite3_column_type(stmt_, index) == SQLITE_NULL) return std::nullopt;
    return column_text(index);
  }
  std::int64_t column_int64(int index) const { return sqlite3_column_int64(stmt_, index); }
  std::optional<std::int64_t> column_optional_int64(int index) const {
    if (sqlite3_column_type(stmt_, index) == SQLITE_NULL) return std::nullopt;
    return column_int64(index);
  }
  // Rows the last INSERT, UPDATE or DELETE of the connection changed.
  std::int64_t changes() const { return sqlite3_changes(db_); }

  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bind_rc_ = SQLITE_OK;
  }

 private:
  friend class statement_cache;
  // lent: the cache's in-use flag of a cached statement, cleared when this one is done with it.
  statement(sqlite3* db, sqlite3_stmt* stmt, statement_stats* stats, bool* lent)
      : db_(db), stmt_(stmt), stats_(stats), lent_(lent) {}
  void note(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }
  // Counted after the reset or before the finalize that reports the run to a profile callback
  // (sqlite3_trace_v2), which then sees this run's counters.
  void count_work(int reset) {
    if (stats_ == nullptr) return;
    stats_->vm_steps += static_cast<std::uint64_t>(sqlite3_stmt_status(stmt_, SQLITE_STMTSTATUS_VM_STEP, reset));
    stats_->full_scan_steps +=
        static_cast<std::uint64_t>(sqlite3_stmt_status(stmt_, SQLITE_STMTSTATUS_FULLSCAN_STEP, reset));
  }
  void release() {
    if (stmt_ == nullptr) return;
    if (lent_ == nullptr) {
      count_work(0);
      sqlite3_finalize(stmt_);
      return;
    }
    // Reset at once: a statement left mid-way keeps its read snapshot, and with it the WAL, alive.
    sqlite3_reset(stmt_);
    count_work(1);  // the next use counts from zero
    sqlite3_clear_bindings(stmt_);
    *lent_ = false;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  statement_stats* stats_;
  bool* lent_;
  int bind_rc_ = SQLITE_OK;
};

// The statements of one connection, compiled once per SQL text and reused: a request's lookups
// cost a bind and a step, not a parse and a plan. Not thread-safe, like the connection's use.
// A statement whose text is in use already (a query run from inside another's loop) or that
// does not fit any more is compiled for that one use.
class statement_cache {
 public:
  statement_cache(sqlite3* db, statement_stats& stats, std::size_t capacity)
      : db_(db), stats_(stats), capacity_(capacity) {}
  statement_cache(const statement_cache&) = delete;
  statement_cache& operator=(const statement_cache&) = delete;
  // Every statement lent out must have been returned.
  ~statement_cache() { clear(); }

  result<statement> get(std::string_view sql) {
    auto it = entries_.find(sql);
    if (it != entries_.end() && !it->second.lent) {
      ++stats_.reused;
      it->second.lent = true;
      return statement(db_, it->second.stmt, &stats_, &it->second.lent);
    }
    if (it != entries_.end() || entries_.size() >= capacity_) return statement::prepare(db_, sql, &stats_);
    auto raw = compile(db_, sql, SQLITE_PREPARE_PERSISTENT);
    if (!raw) return std::move(raw).err();
    ++stats_.prepared;
    // Nodes of an unordered_map stay put, so the flag's address is stable.
    auto& e = entries_.emplace(std::string(sql), entry{*raw, true}).first->second;
    return statement(db_, e.stmt, &stats_, &e.lent);
  }

  void clear() {
    for (auto& [sql, e] : entries_) sqlite3_finalize(e.stmt);
    entries_.clear();
  }

 private:
  struct entry {
    sqlite3_stmt* stmt;
    bool lent;
  };
  struct text_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  sqlite3* db_;
  statement_stats& stats_;
  std::size_t capacity_;
  std::unordered_map<std::string, entry, text_hash, std::equal_to<>> entries_;
};

// A parameter stored as NULL when empty (an unnamed sandbox's name).
struct null_if_empty {
  const std::string& text;
};

// Binds one value to ?index: text, integers (a size_t is a limit, capped), optional values (NULL
// when empty), a bool as 0 or 1.
inline void bind_value(statement& st, int index, std::string_view v) { st.bind(index, v); }
inline void bind_value(statement& st, int index, const std::string& v) { st.bind(index, v); }
inline void bind_value(statement& st, int index, const char* v) { st.bind(index, v); }
inline void bind_value(statement& st, int index, std::int64_t v) { st.bind(index, v); }
inline void bind_value(statement& st, int index, bool v) { st.bind(index, std::int64_t{v ? 1 : 0}); }
inline void bind_value(statement& st, int index, std::size_t limit) {
  constexpr auto max = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  st.bind(index, static_cast<std::int64_t>(std::min(limit, max)));
}
inline void bind_value(statement& st, int index, const std::optional<std::string>& v) { st.bind(index, v); }
inline void bind_value(statement& st, int index, const std::optional<std::int64_t>& v) {
  if (v)
    st.bind(index, *v);
  else
    st.bind_null(index);
}
inline void bind_value(statement& st, int index, null_if_empty v) { st.bind_text_or_null(index, v.text); }

// One statement of a store: taken from the connection's cache, bound to ?1, ?2, ... in the order
// given, then run or read in one call. A failed prepare is carried to that call, so a store's
// method is one expression:
//   return query(db, "SELECT ... WHERE org_id = ?1 AND id = ?2", org_id, id).one(read_x, "x not found");
// The statement goes back to the cache, reset, when the query is destroyed.
class query {
 public:
  template <typename... A>
  query(database& db, std::string_view sql, const A&... args) : st_(db.prepare(sql)) {
    int index = 1;
    if (st_) (bind_value(*st_, index++, args), ...);
  }
  // A statement of its own, outside the cache (statement::prepare): the connection's own reads.
  explicit query(result<statement> st) : st_(std::move(st)) {}
  // A parameter beyond those given at construction (a list's label filters).
  template <typename A>
  query& bind(int index, const A& value) {
    if (st_) bind_value(*st_, index, value);
    return *this;
  }

  // Runs a statement that returns no rows.
  result<void> run() {
    if (!st_) return st_.err();
    return st_->run();
  }
  // Runs it and says how many rows it changed.
  result<std::int64_t> changes() {
    if (auto r = run(); !r) return std::move(r).err();
    return st_->changes();
  }
  // Every row, each made by read(statement).
  template <typename Read>
  auto rows(Read read) -> result<std::vector<decltype(read(std::declval<const statement&>()))>> {
    std::vector<decltype(read(std::declval<const statement&>()))> out;
    if (auto r = each([&](const statement& row) {
          out.push_back(read(row));
          return true;
        });
        !r)
      return std::move(r).err();
    return out;
  }
  // Rows one at a time until each(statement) returns false; one row in memory at a time.
  template <typename Each>
  result<void> each(Each each) {
    if (!st_) return st_.err();
    for (;;) {
      auto row = st_->step();
      if (!row) return std::move(row).err();
      if (!*row || !each(std::as_const(*st_))) return {};
    }
  }
  // The first row, or nullopt when there is none.
  template <typename Read>
  auto first(Read read) -> result<std::optional<decltype(read(std::declval<const statement&>()))>> {
    using row_type = decltype(read(std::declval<const statement&>()));
    if (!st_) return st_.err();
    auto row = st_->step();
    if (!row) return std::move(row).err();
    if (!*row) return std::optional<row_type>();
    return std::optional<row_type>(read(std::as_const(*st_)));
  }
  // The first row; not_found with that message when there is none.
  template <typename Read>
  auto one(Read read, const std::string& not_found) -> result<decltype(read(std::declval<const statement&>()))> {
    auto row = first(read);
    if (!row) return std::move(row).err();
    if (!*row) return make_error(errc::not_found, not_found);
    return std::move(**row);
  }
  // The first column of the first row as an integer (a count), 0 when there is no row.
  result<std::int64_t> count() {
    auto n = first([](const statement& row) { return row.column_int64(0); });
    if (!n) return std::move(n).err();
    return n->value_or(0);
  }

 private:
  result<statement> st_;
};

// Runs the INSERT of a row named uniquely within its organization (a sandbox, a volume): a taken
// name, a taken id and a missing organization become errors that say which ("volume name 'x' is
// already used"). `kind` names the row in messages; `table` is where it goes.
inline result<void> insert_named(query q, const std::string& kind, const std::string& table, const std::string& name,
                                 const std::string& id, const std::string& org_id) {
  auto r = q.run();
  if (r) return r;
  if (r.err().code == errc::conflict) {
    // The primary key is the only other unique constraint; ids are random, so that is a bug.
    if (r.err().message.find(table + ".name") != std::string::npos)
      return make_error(errc::conflict, kind + " name '" + name + "' is already used");
    return make_error(errc::conflict, kind + " " + id + " already exists");
  }
  if (r.err().code == errc::not_found) return make_error(errc::not_found, "organization " + org_id + " not found");
  return r;
}

// "SELECT <columns> FROM ..." and the like, assembled once per statement.
inline std::string sql(std::string_view before, std::string_view columns, std::string_view after) {
  return std::string(before).append(columns).append(after);
}

// What explain_request_paths() shows, by what each statement is for: each store names the
// statements of a request's path that are its own (orgs.cpp, sandboxes.cpp, audit.cpp, resources.cpp).
using named_statements = std::vector<std::pair<std::string, std::string>>;
named_statements org_request_paths();
named_statements sandbox_request_paths();
named_statements audit_request_paths();
named_statements resource_request_paths();

}  // namespace sandfort::store::detail
