// A full state disk: SQLite's SQLITE_FULL becomes insufficient_storage and a transaction keeps
// nothing of what it did; below the free-space floor ordinary changes are refused before they
// start while reliefs (deletes, stops) run on the WAL reserve until it is used up.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>

#include "open_db.hpp"
#include "rows.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"
#include "temp_dir.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

namespace {

std::int64_t size_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
}

audit::event_record big_event(const std::string& org_id) {
  audit::event_record e;
  e.org_id = org_id;
  e.seq = 1;
  e.ts = t0;
  e.actor = "key:x";
  e.action = "sandbox.create";
  e.outcome = "ok";
  e.details = R"({"pad":")" + std::string(256 << 10, 'x') + "\"}";  // needs 64 new pages
  e.prev_hash = std::string(64, '0');
  e.hash = std::string(64, '1');
  return e;
}

}  // namespace

TEST_CASE("full disk: a write the database has no room for is insufficient_storage and the transaction keeps nothing",
          "[full-disk]") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto o = org_store(*db).create_org("acme", false, t0);
  REQUIRE(o);
  auto pages = db->page_count();
  REQUIRE(pages);
  REQUIRE(db->set_max_page_count(*pages + 4));

  const auto full_before = db->stats().disk_full;
  const auto row = sandbox(o->id);
  {
    auto tx = db->begin();
    REQUIRE(tx);
    REQUIRE(sandbox_store(*db).insert_sandbox(row));  // fits in the pages there are
    auto event = audit_store(*db).insert_audit_event(big_event(o->id));
    REQUIRE_FALSE(event);
    CHECK(event.err().code == errc::insufficient_storage);
    CHECK(event.err().message.find("disk is full") != std::string::npos);
    // The caller gives up: the transaction goes, and the row with it.
  }
  CHECK(db->stats().disk_full == full_before + 1);
  CHECK(sandbox_store(*db).get_sandbox(o->id, row.id).err().code == errc::not_found);
  CHECK(audit_store(*db).audit_head_of(o->id)->seq == 0);

  // Reads go on; once there is room the same change commits whole.
  CHECK(sandbox_store(*db).list_sandboxes(o->id, {}));
  REQUIRE(db->set_max_page_count(1 << 20));
  auto tx = db->begin();
  REQUIRE(tx);
  REQUIRE(sandbox_store(*db).insert_sandbox(row));
  REQUIRE(audit_store(*db).insert_audit_event(big_event(o->id)));
  REQUIRE(tx->commit());
  CHECK(sandbox_store(*db).get_sandbox(o->id, row.id));
  CHECK(audit_store(*db).audit_head_of(o->id)->seq == 1);
}

TEST_CASE("full disk: below the floor a change is refused before it starts, reliefs use the reserve until it is gone",
          "[full-disk]") {
  testing::temp_dir dir;
  const auto path = dir.file("s.db");
  auto db = open_db(path);
  auto o = org_store(*db).create_org("acme", false, t0);
  REQUIRE(o);

  // Room enough: nothing is refused, and the WAL file is written out to the reserve.
  REQUIRE(db->set_space_policy({0, 1 << 20}));
  CHECK(size_of(path + "-wal") >= (1 << 20));
  CHECK_FALSE(db->space().full);
  CHECK(db->admit(write_kind::change));
  const auto left = db->reserve_frames_left();
  CHECK(left > database::relief_frames);

  // A floor above what any disk has free: the disk counts as full.
  REQUIRE(db->set_space_policy({std::int64_t{1} << 60, 1 << 20}));
  auto space = db->space();
  CHECK(space.full);
  CHECK(space.free_bytes > 0);
  CHECK(space.reason.find("store.min_free_mb") != std::string::npos);
  auto refused = db->admit(write_kind::change);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::insufficient_storage);
  CHECK(refused.err().message.find("deletes") != std::string::npos);
  CHECK(db->admit(write_kind::relief));

  // Each commit spends frames of the reserve (nothing checkpoints them meanwhile) until a relief
  // is refused too, before it starts; the WAL file has not grown.
  const auto wal_size = size_of(path + "-wal");
  int commits = 0;
  while (db->admit(write_kind::relief) && commits < 10000) {
    REQUIRE(sandbox_store(*db).insert_sandbox(sandbox(o->id)));
    ++commits;
  }
  CHECK(commits > 10);
  CHECK(db->reserve_frames_left() < database::relief_frames);
  auto relief = db->admit(write_kind::relief);
  REQUIRE_FALSE(relief);
  CHECK(relief.err().code == errc::insufficient_storage);
  CHECK(relief.err().message.find("reserve") != std::string::npos);
  CHECK(size_of(path + "-wal") == wal_size);

  // Space returns: the checkpoint copies the frames back and the next writes start the WAL again
  // from the top, inside the same file.
  REQUIRE(db->set_space_policy({0, 1 << 20}));
  auto done = db->checkpoint_wal();
  REQUIRE(done);
  CHECK_FALSE(done->busy);
  CHECK(db->reserve_frames_left() >= left);
  CHECK(db->admit(write_kind::change));
  REQUIRE(sandbox_store(*db).insert_sandbox(sandbox(o->id)));
  CHECK(size_of(path + "-wal") == wal_size);

  // The zeros past the last frame are no frames: a fresh connection reads every row.
  db.reset();
  auto again = open_db(path);
  auto rows = sandbox_store(*again).list_live_sandboxes(o->id);
  REQUIRE(rows);
  CHECK(rows->size() == static_cast<std::size_t>(commits + 1));
}
