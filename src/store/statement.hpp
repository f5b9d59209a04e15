#pragma once
// A prepared SQLite statement that finalizes itself. Binding errors are remembered and reported
// by the next step(), so call sites read as a straight sequence of binds.

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"

namespace sandfort::store::detail {

// An error of class internal carrying SQLite's message for the connection.
inline error sqlite_error(sqlite3* db, std::string_view what) {
  return make_error(errc::internal, std::string(what) + ": " + sqlite3_errmsg(db));
}

// Constraint failures get their own class so callers can word them for the user:
// UNIQUE and PRIMARY KEY → conflict, FOREIGN KEY → not_found. Everything else is internal.
inline error classify_step_error(sqlite3* db) {
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

class statement {
 public:
  static result<statement> prepare(sqlite3* db, std::string_view sql) {
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, nullptr) != SQLITE_OK) {
      sqlite3_finalize(raw);
      return sqlite_error(db, "sqlite prepare");
    }
    return statement(db, raw);
  }

  statement(statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_), bind_rc_(other.bind_rc_) {
    other.stmt_ = nullptr;
  }
  statement& operator=(statement&&) = delete;
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;
  ~statement() { sqlite3_finalize(stmt_); }

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

  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bind_rc_ = SQLITE_OK;
  }

 private:
  statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  void note(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int bind_rc_ = SQLITE_OK;
};

}  // namespace sandfort::store::detail
