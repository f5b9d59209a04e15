#pragma once
// The only place with SQL. One SQLite file in WAL mode; numbered migrations applied at open.
// This header is the connection: its migrations, statement cache, transactions and the state
// directory's disk. The rows live in the stores by aggregate over it (org_store, sandbox_store,
// audit_store, resource_store, guardrail_store; docs/architecture.md, "Stores by aggregate").
// Every query on tenant data takes the organization id, so a row of another organization is
// simply not found. Calls are synchronous and short; the daemon makes them from its single
// I/O thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandfort/core/error.hpp"

struct sqlite3;

namespace sandfort::store {

namespace detail {
class statement;
class statement_cache;
class query;
}  // namespace detail

// What a connection's statements did so far. vm_steps counts SQLite's virtual-machine
// instructions: it grows with the rows a statement visits and not with the speed of the machine,
// so tests compare it between stores. prepared: statements compiled; reused: taken from the
// connection's statement cache instead.
struct statement_stats {
  std::uint64_t vm_steps = 0;
  std::uint64_t full_scan_steps = 0;  // steps of scans that read a whole table or index
  std::uint64_t prepared = 0;
  std::uint64_t reused = 0;
  std::uint64_t disk_full = 0;  // statements refused for lack of disk space (SQLITE_FULL)
};

// EXPLAIN QUERY PLAN of one statement: what it is for, and SQLite's lines ("SEARCH sandboxes
// USING INDEX sandboxes_live_name (org_id=? AND name=?)") in order.
struct statement_plan {
  std::string name;
  std::vector<std::string> steps;
};

// A WAL checkpoint's outcome: busy when a reader or writer held the log longer than the busy
// timeout (the frames that could be copied were; the log was not emptied). Frame counts as
// sqlite3_wal_checkpoint_v2 gives them (-1 when unknown).
struct wal_checkpoint {
  bool busy = false;
  int log_frames = 0;
  int checkpointed_frames = 0;
};

// The state directory's disk (docs/limits.md, "A full state disk"). Below min_free_bytes free
// (statvfs f_bavail of the database's directory) the disk counts as full: ordinary changes are
// refused before they start, while deletes and stops still commit into reserve_bytes of WAL
// file kept written ahead (SQLite overwrites a WAL in place, so those commits need no new
// blocks whoever else is filling the disk).
struct space_policy {
  std::int64_t min_free_bytes = 64ll << 20;
  std::int64_t reserve_bytes = 8ll << 20;
};

struct disk_space {
  std::int64_t free_bytes = -1;  // -1: statvfs failed
  bool full = false;
  std::string reason;  // why it counts as full
};

// What a write is for: an ordinary change waits for space; a relief (a delete, a stop) frees
// space or ends harm, and runs on a full disk while the reserve lasts.
enum class write_kind { change, relief };

class database;

// A write transaction: BEGIN IMMEDIATE when made (database::begin), ROLLBACK when destroyed
// unless commit() succeeded. Every database call in between joins it, so a change and the audit
// event that records it are stored together or not at all, even if the process is killed.
// The daemon runs on one thread and never holds a transaction across an await; one connection
// has at most one open transaction, and it must not outlive its database.
class transaction {
 public:
  transaction(transaction&& other) noexcept;
  transaction& operator=(transaction&&) = delete;
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  ~transaction();

  // Fails when COMMIT fails (the destructor then rolls back) or when SQLite already rolled back
  // after an earlier error; either way the change did not happen. Committing twice is an error.
  result<void> commit();

 private:
  friend class database;
  explicit transaction(database& db) : db_(&db) {}
  database* db_;  // null once committed or moved from
};

// Told of every life-cycle audit event this connection stored (store::is_lifecycle_action: the
// rows GET /v1/events and webhooks deliver; not an exec's), once it is committed (never of one
// rolled back): the event stream's and the webhook worker's wake-up (docs/events.md). Called on
// the thread that committed, inside commit(): it must not touch the database, only note and wake.
class append_observer {
 public:
  virtual ~append_observer() = default;
  virtual void appended(const std::string& org_id, std::int64_t seq) = 0;
};

class database {
 public:
  // Opens (creating if needed) and migrates. Errors name the file and SQLite's message.
  static result<std::unique_ptr<database>> open(const std::string& path);
  // How long a statement waits for another connection's write lock before failing with
  // `unavailable` (5 s after open). sandfortd keeps it to milliseconds: its one I/O thread
  // must not sit in a lock wait while an admin command writes. It retries every 100 µs: SQLite's
  // own waits grow to 10 ms and miss the short gaps between the audit writer's batches, which
  // hold the lock back to back under a flood of events (audit/group_writer.hpp).
  void set_busy_timeout(std::chrono::milliseconds wait);
  ~database();
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  int schema_version() const;
  // A random id made by the first migration: labels this daemon's containers so that
  // reconciliation never touches another daemon's on the same engine.
  const std::string& instance_id() const { return instance_id_; }
  result<void> ping();

  // --- keeping the WAL bounded ---
  // Copies the WAL into the database file so that the next write starts it again from the top
  // (PRAGMA wal_checkpoint(RESTART)), waiting at most the busy timeout for readers and writers of
  // other connections. The file is not truncated: its blocks are the reserve (space_policy), and
  // journal_size_limit cuts it back after a burst.
  result<wal_checkpoint> checkpoint_wal();

  // --- the state directory's disk (space_policy) ---
  // Takes the policy and writes the reserve when the disk allows (insufficient_storage if not:
  // the daemon then starts with what it has and tries again each maintenance round).
  result<void> set_space_policy(const space_policy& p);
  // Full below the floor, or after a write failed for lack of space until the reserve could be
  // written again (the proof that space returned). One statvfs; no SQL.
  disk_space space();
  // insufficient_storage, saying what still works, when a write of that kind must not start now:
  // a change on a full disk; a relief once fewer than relief_frames of the reserve are left.
  result<void> admit(write_kind kind);
  // Extends the WAL file with zeros up to the reserve, holding the write lock so that no other
  // connection appends meanwhile. insufficient_storage when the disk has no room for it.
  result<void> keep_reserve();
  // WAL frames that can still be committed without growing the WAL file.
  std::int64_t reserve_frames_left();
  static constexpr std::int64_t relief_frames = 64;  // a delete with its event writes about 15

  // --- for tests and benchmarks ---
  // The plan of every statement a request may run: API key and organization lookups, the
  // sandbox lookups by id and by name (every sandbox-scoped call, sessions and commands
  // included), the egress proxy's and the preview router's lookup by id, the updates of a
  // sandbox, lists with cursor, state and label filters, the reaper's live rows, the counts of
  // the volume and snapshot quotas and the audit chain's head. A list of deleted sandboxes is not among them: it asks for history.
  result<std::vector<statement_plan>> explain_request_paths();
  const statement_stats& stats() const { return stats_; }
  // The database cannot grow past `pages` (PRAGMA max_page_count): a full disk, deterministically.
  result<void> set_max_page_count(std::int64_t pages);
  result<std::int64_t> page_count();

  // Takes the write lock now (unavailable when another connection holds it longer than the busy
  // timeout), so nothing between here and commit() can fail for lack of it. A second begin()
  // while one is open is an internal error: nesting is not supported.
  result<transaction> begin();
  // begin() only if the write lock is free now: never waits for it (`unavailable` at once), for a
  // thread that must not sit in a lock wait.
  result<transaction> begin_if_free();
  bool in_transaction() const { return in_transaction_; }

  // The one observer of committed audit appends (null: none). It must outlive the database's use.
  void observe_appends(append_observer* o) { append_observer_ = o; }
  // An audit event stored (audit_store::insert_audit_event): told to the observer at the commit
  // of the open transaction (dropped at its rollback), or now when none is open.
  void note_append(const std::string& org_id, std::int64_t seq);

 private:
  friend class transaction;
  friend class detail::query;  // the stores' one way to a statement (src/store/statement.hpp)
  explicit database(sqlite3* db);
  // COMMIT or ROLLBACK of the open transaction.
  result<void> end_transaction(bool commit);
  // What a statement of a transaction SQLite already rolled back gets.
  error rolled_back_error() const;
  // The connection's cached statement for sql, reset when the caller is done with it.
  result<detail::statement> prepare(std::string_view sql);
  result<std::vector<std::string>> explain(const std::string& sql);

  // The WAL hook: frames in the log after each commit, and SQLite's auto-checkpoint (which the
  // hook replaces) at wal_autocheckpoint frames.
  static int on_wal_commit(void* self, sqlite3* db, const char* name, int frames);
  // The busy handler set_busy_timeout installs.
  static int on_busy(void* self, int retries);

  sqlite3* db_;
  std::string path_;
  std::string instance_id_;
  bool in_transaction_ = false;
  std::chrono::milliseconds busy_timeout_{5000};
  bool own_busy_handler_ = false;  // set_busy_timeout's, instead of the pragma's
  std::chrono::steady_clock::time_point busy_since_{};
  std::uint64_t disk_full_at_begin_ = 0;
  append_observer* append_observer_ = nullptr;
  std::vector<std::pair<std::string, std::int64_t>> appends_pending_;  // of the open transaction
  space_policy space_;
  std::uint64_t disk_full_seen_ = 0;
  bool short_of_space_ = false;  // a write failed for lack of space; cleared once the reserve is written again
  std::int64_t wal_frames_ = 0;
  std::int64_t page_size_ = 4096;
  statement_stats stats_;
  std::unique_ptr<detail::statement_cache> statements_;
};

}  // namespace sandfort::store
