#pragma once
// The only place with SQL. One SQLite file in WAL mode; numbered migrations applied at open.
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

// The operator's organization (created at bootstrap; its keys are superadmins).
inline constexpr const char* operator_org_name = "superadmin";

namespace detail {
class statement;
class statement_cache;
}  // namespace detail

struct org {
  std::string id;  // "org-" + 16 hex
  std::string name;
  bool superadmin = false;
  std::string created_at;
  // active → disabled ⇄ active; active|disabled → deleting → deleted. Only an active
  // organization's keys and tokens are accepted.
  std::string state = "active";
  std::optional<std::string> state_changed_at;
};

struct api_key {
  std::string id;  // "key-" + 16 hex
  std::string org_id;
  std::string name;
  std::string role;  // admin | member | viewer
  std::string created_at;
  std::optional<std::string> expires_at;
  std::optional<std::string> revoked_at;
  std::optional<std::string> last_used_at;  // to the minute: written at most once a minute
};

struct sandbox_record {
  std::string id;  // "sbx-" + 16 hex
  std::string org_id;
  std::string name;  // empty: unnamed. Unique per organization among rows not deleted.
  std::string state;  // creating | pulling | started | stopped | error | deleted
  std::string snapshot;
  std::string spec_json;  // the request as validated (resources, env, labels, ...), owned by the sandbox module
  std::string container_id;
  std::string error_message;
  std::string created_at;
  std::string updated_at;
  std::optional<std::string> expires_at;
  std::string proxy_secret_sha256;  // the egress proxy credential's secret, hashed
  std::string preview_key;          // preview tokens are HMACs under this key
  std::string address;              // IPv4 on the sandbox network while started, else empty
};

// What a page reads besides the rows it returns: without labels, nothing (the live rows of the
// organization from the cursor on, in id order; a state filter skips the live rows in other
// states); with labels, the live sandboxes that carry the first label, from the cursor on, whose
// other labels or state do not match. Deleted rows are read only when state is "deleted".
struct sandbox_filter {
  std::string state;       // empty: any state but deleted
  std::string after_id;    // cursor: ids sort ascending
  std::size_t limit = 100;
  // (key, value): only sandboxes whose spec_json `labels` object has every one. At most 64.
  std::vector<std::pair<std::string, std::string>> labels;
};

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

// An organization's guardrails (docs/guardrails.md). Empty optionals: the configured default.
struct org_guardrails {
  std::string org_id;
  std::optional<std::int64_t> max_sandboxes;
  std::optional<std::int64_t> max_millicpus;
  std::optional<std::int64_t> max_memory_mb;
  std::optional<std::int64_t> max_volumes;    // volumes not deleted (schema version 9)
  std::optional<std::int64_t> max_snapshots;  // snapshots not deleted (schema version 9)
  std::optional<std::int64_t> max_disk_mb;    // disk_mb of sandboxes not deleted (schema version 10)
  std::optional<std::string> allowed_images_json;  // JSON array of patterns, owned by the sandbox module
  std::optional<std::string> stopped_since;        // the kill switch: set while new sandboxes are refused
  bool stopped_by_superadmin = false;
  std::string updated_at;
};

// A sandbox a guardrail stopped, and when it is to be deleted unless started again.
struct sandbox_deadline {
  std::string sandbox_id;
  std::string org_id;
  std::string delete_after;
  std::string reason;
};

// One event of an organization's audit chain, stored exactly as given: the audit module computes
// seq, prev_hash and hash, and the store never rewrites a field (a verifier rehashes these bytes).
struct audit_event {
  std::string org_id;
  std::int64_t seq = 0;  // 1, 2, 3, ... per organization
  std::string ts;        // RFC 3339, UTC
  std::string actor;
  std::string action;
  std::string target;
  std::string outcome;
  std::string request_id;
  std::string source;
  std::string details = "{}";  // JSON object text, as given
  std::string prev_hash;
  std::string hash;
};

// The newest event of a chain. seq 0 and an empty hash: no events yet.
struct audit_head {
  std::int64_t seq = 0;
  std::string hash;
};

// A signature over (org_id, seq, head_hash, ts) by the key named key_id.
struct audit_checkpoint {
  std::string org_id;
  std::int64_t seq = 0;
  std::string head_hash;
  std::string ts;
  std::string key_id;
  std::string signature;
};

// Events come in ascending seq. What a page reads besides the events it returns:
// - without a time bound: nothing when at most one of target, actor, action is set (the primary
//   key or that field's index, sought to the cursor); with several, the events after the cursor
//   that match the first of target, actor, action but not the others;
// - with a time bound: every event of the organization inside the bounds, whatever the cursor
//   (the time index, then a sort by seq). Events outside the bounds are never read, but paging
//   through a wide window reads that window once per page.
// Events of other organizations are never read.
struct audit_filter {
  std::int64_t after_seq = 0;  // cursor: events with seq > after_seq, ascending
  std::string since_ts;        // inclusive bounds on ts when not empty (RFC 3339 strings compare as text)
  std::string until_ts;
  std::string actor;  // exact match when not empty
  std::string action;
  std::string target;
  std::size_t limit = 100;
};

// --- Volumes (src/store/volumes.cpp) -------------------------------------------------------------
// An organization's named volume. The Docker volume's name is random and says nothing of the
// organization or the name: those live here only.
struct volume_record {
  std::string id;  // "vol-" + 16 hex
  std::string org_id;
  std::string name;         // unique per organization among volumes not deleted
  std::string docker_name;  // "sandfort-vol-" + 16 hex
  std::optional<std::int64_t> size_mb;
  std::string state;  // ready | deleting | deleted
  std::string created_at;
  std::string updated_at;
};

// A volume a sandbox mounts, with the volume's names.
struct sandbox_volume {
  std::string sandbox_id;
  std::string volume_id;
  std::string volume_name;
  std::string docker_name;
  std::string mount_path;
  bool read_only = false;
};
// --- end of volumes -------------------------------------------------------------------------------

// --- Snapshots (src/store/snapshots.cpp) ---------------------------------------------------------
// A sandbox's filesystem committed as an image. The image's name is random and says nothing of
// the organization or the name: those live here only.
struct snapshot_record {
  std::string id;  // "snap-" + 16 hex
  std::string org_id;
  std::string name;       // unique per organization among snapshots not deleted
  std::string image_ref;  // "sandfort-snap/<16 hex>:latest"
  std::int64_t size_bytes = 0;
  std::string source_sandbox_id;
  std::string state;  // ready | deleting | deleted
  std::string created_at;
  std::string updated_at;
};
// --- end of snapshots -----------------------------------------------------------------------------

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

class database {
 public:
  // Opens (creating if needed) and migrates. Errors name the file and SQLite's message.
  static result<std::unique_ptr<database>> open(const std::string& path);
  // How long a statement waits for another process's write lock before failing with
  // `unavailable` (5 s after open). sandfortd keeps it to milliseconds: its one I/O thread
  // must not sit in a lock wait while an admin command writes.
  void set_busy_timeout(std::chrono::milliseconds wait);
  ~database();
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  int schema_version() const;
  // A random id made by the first migration: labels this daemon's containers so that
  // reconciliation never touches another daemon's on the same engine.
  const std::string& instance_id() const { return instance_id_; }
  result<void> ping();

  result<org> create_org(const std::string& name, bool superadmin, const std::string& created_at);
  result<org> get_org(const std::string& id);
  result<org> find_org_by_name(const std::string& name);
  // Every organization not deleted, by name.
  result<std::vector<org>> list_orgs();
  // Moves an organization to `state`, only from one of `from` (conflict otherwise, not_found if absent).
  result<void> set_org_state(const std::string& id, const std::string& state, const std::vector<std::string>& from,
                             const std::string& at);
  // Revokes every key of the organization not revoked yet; returns how many.
  result<int> revoke_org_keys(const std::string& org_id, const std::string& revoked_at);

  // key.id, org_id, name, role, created_at, expires_at are taken from `key`.
  result<void> insert_api_key(const api_key& key, const std::string& secret_sha256_hex);
  // Any key with that hash, revoked or expired ones included (the caller decides).
  result<api_key> find_api_key_by_hash(const std::string& secret_sha256_hex);
  result<std::vector<api_key>> list_api_keys(const std::string& org_id);
  // Keys of the organization that still work at `now`: not revoked, not expired (the key cap).
  result<std::int64_t> count_working_api_keys(const std::string& org_id, const std::string& now);
  // not_found when the key is absent, in another organization, or already revoked.
  result<void> revoke_api_key(const std::string& org_id, const std::string& key_id, const std::string& revoked_at);
  // Records a use of the key (the caller writes at most once a minute per key).
  result<void> touch_api_key(const std::string& key_id, const std::string& used_at);

  // conflict when the name is taken in that organization. The labels of spec_json become
  // searchable (sandbox_filter::labels) in the same statement.
  result<void> insert_sandbox(const sandbox_record& s);
  // By id, else by name (an id wins over a name that looks like one): two index lookups whatever
  // the organization's history. Rows in state deleted are not found.
  result<sandbox_record> get_sandbox(const std::string& org_id, const std::string& id_or_name);
  // One query per page (see sandbox_filter); invalid_argument beyond 64 label filters.
  result<std::vector<sandbox_record>> list_sandboxes(const std::string& org_id, const sandbox_filter& filter);
  // Updates state, container_id, error_message, address, the proxy credential's hash and
  // updated_at of one row. A deleted row is final: updating it is not_found, so a stale copy
  // held across an await cannot revive it.
  result<void> update_sandbox(const sandbox_record& s);
  // Updates spec_json, expires_at and updated_at (PATCH), apart from the state so that neither
  // overwrites the other with a stale copy.
  result<void> update_sandbox_spec(const sandbox_record& s);
  // Daemon-wide lookup by id for the egress proxy and the preview router, which are reached
  // without an organization's key: rows in state deleted are not found.
  result<sandbox_record> find_live_sandbox(const std::string& id);
  // Daemon-wide, for reconciliation and the TTL reaper: every row not deleted, of every
  // organization, by id. Reads live rows only.
  result<std::vector<sandbox_record>> list_live_sandboxes_all_orgs();
  // Daemon-wide, for GET /metrics: {state, how many} of the rows not deleted, by state. Reads
  // live rows only, however many deleted ones there are.
  result<std::vector<std::pair<std::string, std::int64_t>>> count_live_sandboxes_by_state();

  // --- keeping history bounded ---
  // Removes up to `batch` rows of sandboxes deleted before `deleted_before` (RFC 3339 as
  // format_time writes it), oldest first, in one short statement; returns how many. Their labels
  // went when they were deleted; the audit log keeps their story.
  result<std::size_t> prune_deleted_sandboxes(const std::string& deleted_before, std::size_t batch);
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

  // --- Guardrails (src/store/guardrails.cpp) ---------------------------------------------------
  // The organization's row, or one with only org_id set when it has none.
  result<org_guardrails> get_org_guardrails(const std::string& org_id);
  result<void> put_org_guardrails(const org_guardrails& g);
  // The organization's sandboxes that are not deleted: what its quotas count.
  result<std::vector<sandbox_record>> list_live_sandboxes(const std::string& org_id);
  // Replaces the sandbox's deadline; clear_sandbox_deadline removes it (started again, deleted).
  result<void> set_sandbox_deadline(const sandbox_deadline& d);
  result<void> clear_sandbox_deadline(const std::string& sandbox_id);
  // Deadlines at or before `now` (RFC 3339 text), oldest first, at most `limit`.
  result<std::vector<sandbox_deadline>> due_sandbox_deadlines(const std::string& now, std::size_t limit);

  // --- Volumes (src/store/volumes.cpp) -----------------------------------------------------------
  // conflict when the organization has a live volume of that name.
  result<void> insert_volume(const volume_record& v);
  // By id, else by name; deleted volumes are not found.
  result<volume_record> get_volume(const std::string& org_id, const std::string& id_or_name);
  // Volumes not deleted, by name, after `after_name` (the cursor), at most `limit`.
  result<std::vector<volume_record>> list_volumes(const std::string& org_id, const std::string& after_name,
                                                  std::size_t limit);
  // Moves a volume to `state` only from one of `from` (conflict otherwise, not_found if absent).
  result<void> set_volume_state(const std::string& org_id, const std::string& id, const std::string& state,
                                const std::vector<std::string>& from, const std::string& at);
  // A sandbox not deleted (stopped and failed ones included: they would mount it again) that
  // mounts the volume, or nullopt: one index lookup.
  result<std::optional<std::string>> volume_mounted_by(const std::string& volume_id);
  result<void> insert_sandbox_volume(const std::string& sandbox_id, const std::string& volume_id,
                                     const std::string& mount_path, bool read_only);
  // The volumes a sandbox mounts, by mount path.
  result<std::vector<sandbox_volume>> list_sandbox_volumes(const std::string& sandbox_id);
  // Daemon-wide, for start-up reconciliation: every volume not deleted, of every organization.
  // Reads the live-only index volumes_live_name, never deleted rows.
  result<std::vector<volume_record>> list_live_volumes_all_orgs();
  // What the organization's volume quota counts: its volumes not deleted (deleting ones count:
  // their Docker volume may still be there). Reads the live-only index volumes_live_name.
  result<std::int64_t> count_live_volumes(const std::string& org_id);

  // --- Snapshots (src/store/snapshots.cpp) -------------------------------------------------------
  // conflict when the organization has a live snapshot of that name.
  result<void> insert_snapshot(const snapshot_record& s);
  // By id, else by name; deleted snapshots are not found.
  result<snapshot_record> get_snapshot(const std::string& org_id, const std::string& id_or_name);
  // Snapshots not deleted, by name, after `after_name` (the cursor), at most `limit`.
  result<std::vector<snapshot_record>> list_snapshots(const std::string& org_id, const std::string& after_name,
                                                      std::size_t limit);
  // Moves a snapshot to `state` only from one of `from` (conflict otherwise, not_found if absent).
  result<void> set_snapshot_state(const std::string& org_id, const std::string& id, const std::string& state,
                                  const std::vector<std::string>& from, const std::string& at);
  // A sandbox not deleted whose image is `image_ref`, or nullopt: one index lookup.
  result<std::optional<std::string>> snapshot_used_by(const std::string& image_ref);
  // Daemon-wide, for start-up reconciliation: every snapshot not deleted, of every organization.
  // Reads the live-only index snapshots_live_name, never deleted rows.
  result<std::vector<snapshot_record>> list_live_snapshots_all_orgs();
  // What the organization's snapshot quota counts: its snapshots not deleted (deleting ones
  // count). Reads the live-only index snapshots_live_name.
  result<std::int64_t> count_live_snapshots(const std::string& org_id);

  // Takes the write lock now (unavailable when another connection holds it longer than the busy
  // timeout), so nothing between here and commit() can fail for lack of it. A second begin()
  // while one is open is an internal error: nesting is not supported.
  result<transaction> begin();

  // --- audit chain (hashing, signing and verifying live in the audit module) ---
  result<audit_head> audit_head_of(const std::string& org_id);
  // conflict when (org_id, seq) exists: two writers that read the same head cannot both append.
  // invalid_argument when seq < 1.
  result<void> insert_audit_event(const audit_event& e);
  result<std::vector<audit_event>> list_audit_events(const std::string& org_id, const audit_filter& f);
  // One organization's events in seq order from from_seq (inclusive), one row in memory at a
  // time, from one consistent snapshot; `each` returns false to stop. `each` may read through
  // this database but must not write.
  result<void> scan_audit_events(const std::string& org_id, std::int64_t from_seq,
                                 const std::function<bool(const audit_event&)>& each);
  // Every org id that has events or checkpoints, sorted; one index seek per organization.
  result<std::vector<std::string>> audit_org_ids();
  // conflict when that organization already has a checkpoint at that seq.
  result<void> insert_audit_checkpoint(const audit_checkpoint& c);
  // The one with the highest seq; nullopt when there is none.
  result<std::optional<audit_checkpoint>> latest_audit_checkpoint(const std::string& org_id);
  // Checkpoints with seq > after_seq, ascending.
  result<std::vector<audit_checkpoint>> list_audit_checkpoints(const std::string& org_id, std::int64_t after_seq,
                                                               std::size_t limit);

 private:
  friend class transaction;
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

  sqlite3* db_;
  std::string path_;
  std::string instance_id_;
  bool in_transaction_ = false;
  std::uint64_t disk_full_at_begin_ = 0;
  space_policy space_;
  std::uint64_t disk_full_seen_ = 0;
  bool short_of_space_ = false;  // a write failed for lack of space; cleared once the reserve is written again
  std::int64_t wal_frames_ = 0;
  std::int64_t page_size_ = 4096;
  statement_stats stats_;
  std::unique_ptr<detail::statement_cache> statements_;
};

}  // namespace sandfort::store
