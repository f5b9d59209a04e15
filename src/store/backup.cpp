// sqlite3_backup_* from a read-only connection of its own: the daemon keeps writing meanwhile
// (WAL mode: a reader does not block it), and one step(-1) copies every page under one read
// transaction, so the copy is the database as it was at one moment.
#include "sandfort/store/backup.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

namespace sandfort::store {

namespace {

namespace fs = std::filesystem;

struct closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using connection = std::unique_ptr<sqlite3, closer>;

// Rows of (id, org_id, name, docker_ref).
result<std::vector<storage_row>> storage_rows(sqlite3* db, const char* sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &raw, nullptr) != SQLITE_OK)
    return make_error(errc::internal, std::string(sql) + ": " + sqlite3_errmsg(db));
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
  std::vector<storage_row> out;
  auto text = [&](int i) {
    const auto* t = sqlite3_column_text(raw, i);
    return std::string(t ? reinterpret_cast<const char*>(t) : "");
  };
  for (;;) {
    int rc = sqlite3_step(raw);
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return make_error(errc::internal, std::string(sql) + ": " + sqlite3_errmsg(db));
    out.push_back({text(0), text(1), text(2), text(3)});
  }
}

result<connection> open(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  connection db(raw);
  if (rc != SQLITE_OK)
    return make_error(errc::unavailable, "cannot open " + path + ": " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  sqlite3_busy_timeout(db.get(), 10'000);
  return db;
}

// The first column of the one row a query returns, as text.
result<std::string> first_value(sqlite3* db, const char* sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &raw, nullptr) != SQLITE_OK)
    return make_error(errc::internal, std::string(sql) + ": " + sqlite3_errmsg(db));
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
  if (sqlite3_step(raw) != SQLITE_ROW) return make_error(errc::internal, std::string(sql) + ": " + sqlite3_errmsg(db));
  const auto* t = sqlite3_column_text(raw, 0);
  return std::string(t ? reinterpret_cast<const char*>(t) : "");
}

result<std::int64_t> scalar(sqlite3* db, const char* sql) {
  auto v = first_value(db, sql);
  if (!v) return std::move(v).err();
  return static_cast<std::int64_t>(std::stoll(*v));
}

result<void> copy_pages(sqlite3* from, sqlite3* to) {
  sqlite3_backup* b = sqlite3_backup_init(to, "main", from, "main");
  if (!b) return make_error(errc::internal, std::string("backup: ") + sqlite3_errmsg(to));
  int rc;
  // BUSY/LOCKED: a writer holds a lock for a moment (a checkpoint); everything else is final.
  for (int attempt = 0;; ++attempt) {
    rc = sqlite3_backup_step(b, -1);
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || attempt == 100) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) return make_error(errc::unavailable, std::string("backup: ") + sqlite3_errstr(rc));
  return ok_t{};
}

result<backup_report> write_copy(const std::string& source, const std::string& temp) {
  auto from = open(source, SQLITE_OPEN_READONLY);
  if (!from) return std::move(from).err();
  // The schema must be ours: a backup of some other file would restore into a daemon that refuses it.
  if (auto tables = scalar(from->get(), "SELECT count(*) FROM sqlite_schema WHERE name IN ('orgs','api_keys','sandboxes')");
      !tables || *tables != 3)
    return make_error(errc::invalid_argument, source + " is not a sandfortd database");
  auto to = open(temp, SQLITE_OPEN_READWRITE);
  if (!to) return std::move(to).err();
  if (auto r = copy_pages(from->get(), to->get()); !r) return std::move(r).err();
  (*from).reset();
  // One self-contained file: the source is in WAL mode, the copy needs no -wal beside it.
  if (auto mode = first_value(to->get(), "PRAGMA journal_mode=DELETE"); !mode) return std::move(mode).err();
  auto check = first_value(to->get(), "PRAGMA integrity_check");
  if (!check) return std::move(check).err();
  if (*check != "ok") return make_error(errc::internal, "the copy fails SQLite's integrity check: " + *check);
  backup_report report;
  struct count {
    std::int64_t* into;
    const char* sql;
  };
  for (auto [into, sql] : {count{&report.organizations, "SELECT count(*) FROM orgs"},
                           count{&report.api_keys, "SELECT count(*) FROM api_keys"},
                           count{&report.sandboxes, "SELECT count(*) FROM sandboxes"},
                           count{&report.audit_events, "SELECT count(*) FROM audit_events"}}) {
    auto n = scalar(to->get(), sql);
    if (!n) return std::move(n).err();
    *into = *n;
  }
  auto instance = first_value(to->get(), "SELECT value FROM meta WHERE key = 'instance_id'");
  if (!instance) return std::move(instance).err();
  report.instance_id = std::move(*instance);
  auto volumes = storage_rows(to->get(), "SELECT id, org_id, name, docker_name FROM volumes WHERE state <> 'deleted' ORDER BY id");
  if (!volumes) return std::move(volumes).err();
  report.volumes = std::move(*volumes);
  auto snapshots =
      storage_rows(to->get(), "SELECT id, org_id, name, image_ref FROM snapshots WHERE state <> 'deleted' ORDER BY id");
  if (!snapshots) return std::move(snapshots).err();
  report.snapshots = std::move(*snapshots);
  return report;
}

}  // namespace

result<backup_report> backup_database(const std::string& source, const std::string& dest, bool replace) {
  std::error_code ec;
  if (!fs::is_regular_file(source, ec)) return make_error(errc::not_found, "no database at " + source);
  if (!replace && fs::exists(dest, ec))
    return make_error(errc::conflict, dest + " exists (give --force to replace it)");
  const fs::path target = fs::absolute(dest, ec);
  if (ec) return make_error(errc::invalid_argument, "bad path " + dest + ": " + ec.message());
  if (fs::equivalent(source, target, ec)) return make_error(errc::invalid_argument, "the backup cannot be the database itself");

  // Beside the target (same filesystem: the rename is atomic), created 0600 before SQLite opens it.
  std::random_device rd;
  const std::string temp = target.string() + ".tmp-" + std::to_string(rd());
  int fd = ::open(temp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(errc::unavailable, "cannot create " + temp + ": " + std::strerror(errno));
  ::close(fd);
  auto report = write_copy(source, temp);
  if (report) {
    if (int f = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC); f >= 0) {
      ::fsync(f);
      ::close(f);
    }
    fs::rename(temp, target, ec);
    if (ec) report = make_error(errc::unavailable, "cannot move the copy to " + target.string() + ": " + ec.message());
  }
  if (!report) {
    fs::remove(temp, ec);
    for (const char* suffix : {"-journal", "-wal", "-shm"}) fs::remove(temp + suffix, ec);
    return report;
  }
  if (int dir = ::open(target.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  report->bytes = static_cast<std::int64_t>(fs::file_size(target, ec));
  return report;
}

}  // namespace sandfort::store
