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
#include <thread>
#include <utility>

#include "migrations.hpp"
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
  return detail::query(statement::prepare(db, sql))
      .one([](const statement& row) { return row.column_text(0); }, std::string("no row for: ") + sql);
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

// Every statement explain_request_paths() shows, by what it is for: each store's, in turn.
detail::named_statements request_path_statements() {
  detail::named_statements all;
  for (auto part : {detail::org_request_paths, detail::sandbox_request_paths, detail::audit_request_paths,
                    detail::resource_request_paths}) {
    auto statements = part();
    all.insert(all.end(), std::make_move_iterator(statements.begin()), std::make_move_iterator(statements.end()));
  }
  return all;
}

}  // namespace

void database::set_busy_timeout(std::chrono::milliseconds wait) {
  busy_timeout_ = wait;
  own_busy_handler_ = true;
  sqlite3_busy_handler(db_, &database::on_busy, this);
}

int database::on_busy(void* self, int retries) {
  auto* d = static_cast<database*>(self);
  auto now = std::chrono::steady_clock::now();
  if (retries == 0) d->busy_since_ = now;
  if (now - d->busy_since_ >= d->busy_timeout_) return 0;
  std::this_thread::sleep_for(std::chrono::microseconds(100));
  return 1;
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

// --- keeping the WAL bounded ---

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
  return detail::query(statement::prepare(db_, "EXPLAIN QUERY PLAN " + sql_text)).rows([](const statement& row) {
    return row.column_text(3);
  });
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

result<transaction> database::begin_if_free() {
  sqlite3_busy_handler(db_, nullptr, nullptr);  // a busy lock fails at once
  auto tx = begin();
  if (own_busy_handler_)
    sqlite3_busy_handler(db_, &database::on_busy, this);
  else
    sqlite3_busy_timeout(db_, static_cast<int>(busy_timeout_.count()));
  return tx;
}

void database::note_append(const std::string& org_id, std::int64_t seq) {
  if (append_observer_ == nullptr) return;
  if (in_transaction_)
    appends_pending_.emplace_back(org_id, seq);
  else
    append_observer_->appended(org_id, seq);
}

result<void> database::end_transaction(bool commit) {
  // After some errors (disk full, I/O) SQLite has already rolled back; later statements then ran
  // on their own, so the changes are not one unit any more and committing must not claim they are.
  if (sqlite3_get_autocommit(db_) != 0) {
    in_transaction_ = false;
    appends_pending_.clear();
    if (commit) return rolled_back_error();
    return {};
  }
  auto st = prepare(commit ? "COMMIT" : "ROLLBACK");
  auto r = st ? st->run() : result<void>(std::move(st).err());
  // A failed ROLLBACK is not retried: nothing better is left to do than to report it.
  if (r || !commit) in_transaction_ = false;
  if (!in_transaction_) {
    auto appended = std::move(appends_pending_);
    appends_pending_.clear();
    if (commit && r && append_observer_ != nullptr)
      for (const auto& [org_id, seq] : appended) append_observer_->appended(org_id, seq);
  }
  return r;
}

}  // namespace sandfort::store
