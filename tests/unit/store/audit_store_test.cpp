// The audit chain's storage: events and checkpoints, filters and cursors, the query plans and
// costs the store promises, and transactions that keep a change and its event together, also
// across a killed process.
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <optional>

#include "sandfort/core/ids.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"
#include "temp_dir.hpp"
#include "open_db.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

namespace {

// Seconds after 2026-03-01T00:00:00Z as RFC 3339 text, or after midnight of a day in February.
std::string ts_at(int second, int days_before = 0) {
  char buf[48];  // room for any int the compiler cannot rule out
  std::snprintf(buf, sizeof buf, "2026-%02d-%02dT%02d:%02d:%02d.000Z", days_before > 0 ? 2 : 3,
                days_before > 0 ? 28 - days_before : 1, second / 3600, (second / 60) % 60, second % 60);
  return buf;
}

audit::event_record make_event(const std::string& org_id, std::int64_t seq, const std::string& ts,
                               const std::string& actor = "key-a", const std::string& action = "sandbox.create",
                               const std::string& target = "") {
  audit::event_record e;
  e.org_id = org_id;
  e.seq = seq;
  e.ts = ts;
  e.actor = actor;
  e.action = action;
  e.target = target;
  e.outcome = "ok";
  e.request_id = "req-" + std::to_string(seq);
  e.source = "10.0.0.1";
  e.details = R"({"n":)" + std::to_string(seq) + "}";
  e.prev_hash = "prev-" + std::to_string(seq - 1);
  e.hash = "hash-" + std::to_string(seq);
  return e;
}

void append(database& db, const audit::event_record& e) {
  auto r = audit_store(db).insert_audit_event(e);
  INFO((r ? std::string() : r.err().message));
  REQUIRE(r);
}

std::vector<std::int64_t> seqs(const std::vector<audit::event_record>& events) {
  std::vector<std::int64_t> out;
  for (const auto& e : events) out.push_back(e.seq);
  return out;
}

std::vector<std::int64_t> listed(database& db, const std::string& org_id, const audit_filter& f) {
  auto got = audit_store(db).list_audit_events(org_id, f);
  INFO((got ? std::string() : got.err().message));
  REQUIRE(got);
  return seqs(*got);
}

audit::checkpoint_record checkpoint(const std::string& org_id, std::int64_t seq) {
  return audit::checkpoint_record{org_id,
                                  seq,
                                  "hash-" + std::to_string(seq),
                                  ts_at(static_cast<int>(seq)),
                                  "ed25519:k1",
                                  "sig-" + std::to_string(seq)};
}

}  // namespace

TEST_CASE("audit events: the head, every field as given, and a conflict on a taken seq") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));

  auto empty = audit_store(*db).audit_head_of("org-a");
  REQUIRE(empty);
  CHECK(empty->seq == 0);
  CHECK(empty->hash.empty());

  auto first = make_event("org-a", 1, ts_at(0), "key-1", "sandbox.create", "sbx-1");
  first.details = R"({"quote":"o'brien; DROP TABLE audit_events; --","nested":{"a":[1,2]}})";
  append(*db, first);
  auto second = make_event("org-a", 2, ts_at(1));
  second.details = "{}";
  second.target.clear();
  second.request_id.clear();
  second.source.clear();
  append(*db, second);
  append(*db, make_event("org-b", 1, ts_at(0)));

  auto head = audit_store(*db).audit_head_of("org-a");
  REQUIRE(head);
  CHECK(head->seq == 2);
  CHECK(head->hash == "hash-2");
  CHECK(audit_store(*db).audit_head_of("org-b")->seq == 1);

  auto got = audit_store(*db).list_audit_events("org-a", {});
  REQUIRE(got);
  REQUIRE(got->size() == 2);
  const auto& e = (*got)[0];
  CHECK(e.org_id == "org-a");
  CHECK(e.seq == 1);
  CHECK(e.ts == ts_at(0));
  CHECK(e.actor == "key-1");
  CHECK(e.action == "sandbox.create");
  CHECK(e.target == "sbx-1");
  CHECK(e.outcome == "ok");
  CHECK(e.request_id == "req-1");
  CHECK(e.source == "10.0.0.1");
  CHECK(e.details == first.details);
  CHECK(e.prev_hash == "prev-0");
  CHECK(e.hash == "hash-1");
  CHECK((*got)[1].details == "{}");
  CHECK((*got)[1].target.empty());

  SECTION("a seq already in the chain is a conflict and changes nothing") {
    auto dup = make_event("org-a", 2, ts_at(5), "key-evil");
    auto r = audit_store(*db).insert_audit_event(dup);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::conflict);
    CHECK_THAT(r.err().message, Catch::Contains("org-a") && Catch::Contains("2"));
    CHECK(audit_store(*db).list_audit_events("org-a", {})->back().actor == "key-a");
  }
  SECTION("seq starts at 1") {
    for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}}) {
      auto r = audit_store(*db).insert_audit_event(make_event("org-c", bad, ts_at(0)));
      REQUIRE_FALSE(r);
      CHECK(r.err().code == errc::invalid_argument);
    }
    CHECK(audit_store(*db).audit_head_of("org-c")->seq == 0);
  }
}

TEST_CASE("listing audit events: cursor pages, bounds, exact filters, one organization only") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  // seq i at second 10*i; actors alternate; every third event deletes; targets sbx-0..sbx-3.
  for (int i = 1; i <= 12; ++i) {
    append(*db, make_event("org-a", i, ts_at(10 * i), i % 2 == 0 ? "key-even" : "key-odd",
                           i % 3 == 0 ? "sandbox.delete" : "sandbox.create", "sbx-" + std::to_string(i % 4)));
    // The same fields in organizations sorting before and after: never listed for org-a.
    append(*db, make_event("org-0", i, ts_at(10 * i), "key-even", "sandbox.delete", "sbx-0"));
    append(*db, make_event("org-z", i, ts_at(10 * i), "key-even", "sandbox.delete", "sbx-0"));
  }

  SECTION("pages follow the cursor without overlap or gap") {
    std::vector<std::int64_t> seen;
    audit_filter f;
    f.limit = 5;
    for (;;) {
      auto page = listed(*db, "org-a", f);
      CHECK(page.size() <= 5);
      if (page.empty()) break;
      seen.insert(seen.end(), page.begin(), page.end());
      f.after_seq = page.back();
    }
    CHECK(seen == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    f.after_seq = 0;
    f.limit = 0;
    CHECK(listed(*db, "org-a", f).empty());
    CHECK(listed(*db, "org-nobody", {}).empty());
  }
  SECTION("time bounds are inclusive, each alone or both") {
    audit_filter f;
    f.since_ts = ts_at(30);
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    f.until_ts = ts_at(50);
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{3, 4, 5});
    f.since_ts.clear();
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{1, 2, 3, 4, 5});
    f.since_ts = ts_at(31);
    f.until_ts = ts_at(39);
    CHECK(listed(*db, "org-a", f).empty());
  }
  SECTION("actor, action and target match exactly, alone and together") {
    audit_filter f;
    f.actor = "key-even";
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{2, 4, 6, 8, 10, 12});
    f.action = "sandbox.delete";
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{6, 12});
    f.actor.clear();
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{3, 6, 9, 12});
    f.action.clear();
    f.target = "sbx-1";
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{1, 5, 9});
    f.actor = "key-odd";
    f.action = "sandbox.delete";
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{9});
    f.actor = "key-od";  // a prefix is not a match
    CHECK(listed(*db, "org-a", f).empty());
  }
  SECTION("filters combine with bounds, the cursor and the limit") {
    audit_filter f;
    f.actor = "key-even";
    f.since_ts = ts_at(40);
    f.until_ts = ts_at(110);
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{4, 6, 8, 10});
    f.after_seq = 4;
    f.limit = 2;
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{6, 8});
    f.after_seq = 8;
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{10});
    f.target = "sbx-2";
    f.after_seq = 0;
    f.limit = 100;
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{6, 10});
  }
  SECTION("a time window is found by time, not by seq: a clock that went back is no excuse to miss") {
    append(*db, make_event("org-a", 13, ts_at(15)));  // earlier than seq 2..12
    audit_filter f;
    f.since_ts = ts_at(10);
    f.until_ts = ts_at(20);
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{1, 2, 13});
    f.after_seq = 1;
    f.limit = 1;
    CHECK(listed(*db, "org-a", f) == std::vector<std::int64_t>{2});
  }
}

TEST_CASE("scanning audit events streams one organization in seq order and stops on request") {
  testing::temp_dir dir;
  const auto path = dir.file("s.db");
  auto db = open_db(path);
  for (int i = 1; i <= 6; ++i) {
    append(*db, make_event("org-a", i, ts_at(i)));
    append(*db, make_event("org-b", i, ts_at(i)));
  }
  std::vector<std::int64_t> seen;
  auto collect = [&](const audit::event_record& e) {
    CHECK(e.org_id == "org-a");
    seen.push_back(e.seq);
    return true;
  };

  REQUIRE(audit_store(*db).scan_audit_events("org-a", 1, collect));
  CHECK(seen == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  seen.clear();
  REQUIRE(audit_store(*db).scan_audit_events("org-a", 4, collect));
  CHECK(seen == std::vector<std::int64_t>{4, 5, 6});
  seen.clear();
  REQUIRE(audit_store(*db).scan_audit_events("org-a", 7, collect));
  REQUIRE(audit_store(*db).scan_audit_events("org-nobody", 1, collect));
  CHECK(seen.empty());

  REQUIRE(audit_store(*db).scan_audit_events("org-a", 2, [&](const audit::event_record& e) {
    seen.push_back(e.seq);
    return e.seq < 3;
  }));
  CHECK(seen == std::vector<std::int64_t>{2, 3});

  SECTION("from one snapshot: what another connection appends meanwhile is not seen") {
    auto writer = open_db(path);
    seen.clear();
    REQUIRE(audit_store(*db).scan_audit_events("org-a", 5, [&](const audit::event_record& e) {
      if (e.seq == 5) append(*writer, make_event("org-a", 7, ts_at(7)));
      seen.push_back(e.seq);
      return true;
    }));
    CHECK(seen == std::vector<std::int64_t>{5, 6});
    CHECK(audit_store(*db).audit_head_of("org-a")->seq == 7);
  }
}

TEST_CASE("audit_org_ids lists every organization with events or checkpoints, once, sorted") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto none = audit_store(*db).audit_org_ids();
  REQUIRE(none);
  CHECK(none->empty());

  for (int i = 1; i <= 3; ++i) {
    append(*db, make_event("org-m", i, ts_at(i)));
    append(*db, make_event("org-b", i, ts_at(i)));
  }
  append(*db, make_event("", 1, ts_at(0)));  // not a valid id, but a chain all the same
  REQUIRE(audit_store(*db).insert_audit_checkpoint(checkpoint("org-m", 3)));
  REQUIRE(audit_store(*db).insert_audit_checkpoint(checkpoint("org-x", 9)));  // its events are gone: still listed

  auto ids = audit_store(*db).audit_org_ids();
  REQUIRE(ids);
  CHECK(*ids == std::vector<std::string>{"", "org-b", "org-m", "org-x"});
}

TEST_CASE("audit checkpoints: insert, conflict, latest, pages") {
  testing::temp_dir dir;
  auto db = open_db(dir.file("s.db"));
  auto none = audit_store(*db).latest_audit_checkpoint("org-a");
  REQUIRE(none);
  CHECK_FALSE(none->has_value());

  for (std::int64_t seq : {10, 30, 20}) REQUIRE(audit_store(*db).insert_audit_checkpoint(checkpoint("org-a", seq)));
  REQUIRE(audit_store(*db).insert_audit_checkpoint(checkpoint("org-b", 99)));

  auto dup = audit_store(*db).insert_audit_checkpoint(checkpoint("org-a", 20));
  REQUIRE_FALSE(dup);
  CHECK(dup.err().code == errc::conflict);

  auto latest = audit_store(*db).latest_audit_checkpoint("org-a");
  REQUIRE(latest);
  REQUIRE(latest->has_value());
  const auto& c = **latest;
  CHECK(c.org_id == "org-a");
  CHECK(c.seq == 30);
  CHECK(c.head_hash == "hash-30");
  CHECK(c.ts == ts_at(30));
  CHECK(c.key_id == "ed25519:k1");
  CHECK(c.signature == "sig-30");

  auto page = audit_store(*db).list_audit_checkpoints("org-a", 0, 2);
  REQUIRE(page);
  REQUIRE(page->size() == 2);
  CHECK((*page)[0].seq == 10);
  CHECK((*page)[1].seq == 20);
  page = audit_store(*db).list_audit_checkpoints("org-a", 20, 100);
  REQUIRE(page);
  REQUIRE(page->size() == 1);
  CHECK((*page)[0].seq == 30);
  CHECK(audit_store(*db).list_audit_checkpoints("org-a", 30, 100)->empty());
  CHECK(audit_store(*db).list_audit_checkpoints("org-c", 0, 100)->empty());
}

// --- query plans and costs ---

namespace {

// What SQLite reports for each statement a connection finished: its text and how much work it did.
struct statement_run {
  std::string sql;
  int vm_steps;
  int full_scan_steps;
};
std::vector<statement_run>* recording = nullptr;

int on_statement_done(unsigned type, void*, void* stmt, void*) {
  if (type == SQLITE_TRACE_PROFILE && recording != nullptr) {
    auto* st = static_cast<sqlite3_stmt*>(stmt);
    recording->push_back({sqlite3_sql(st), sqlite3_stmt_status(st, SQLITE_STMTSTATUS_VM_STEP, 0),
                          sqlite3_stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0)});
  }
  return 0;
}

int trace_connection(sqlite3* db, char**, const sqlite3_api_routines*) {
  sqlite3_trace_v2(db, SQLITE_TRACE_PROFILE, &on_statement_done, nullptr);
  return SQLITE_OK;
}

// Every connection opened while it lives reports its statements to `runs`: the store's own
// queries are checked, not copies of them.
class statement_recorder {
 public:
  statement_recorder() {
    recording = &runs;
    sqlite3_auto_extension(reinterpret_cast<void (*)()>(&trace_connection));
  }
  ~statement_recorder() {
    sqlite3_cancel_auto_extension(reinterpret_cast<void (*)()>(&trace_connection));
    recording = nullptr;
  }
  statement_recorder(const statement_recorder&) = delete;
  statement_recorder& operator=(const statement_recorder&) = delete;

  // The runs of the statements reading the audit tables since the last call.
  std::vector<statement_run> take_audit_reads() {
    std::vector<statement_run> out;
    for (auto& r : runs)
      if (r.sql.rfind("SELECT", 0) == 0 && r.sql.find("FROM audit_") != std::string::npos) out.push_back(r);
    runs.clear();
    return out;
  }
  std::vector<statement_run> runs;
};

std::string query_plan(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  INFO(sql);
  REQUIRE(sqlite3_prepare_v2(db, ("EXPLAIN QUERY PLAN " + sql).c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::string plan;
  while (sqlite3_step(st) == SQLITE_ROW) plan += std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 3))) + "\n";
  sqlite3_finalize(st);
  sqlite3_close(db);
  return plan;
}

// The events every cost measurement reads: 20 in org-m at seconds 1..20 of 2026-03-01, seq after
// `base`; even ones by key-x (sandbox.exec on sbx-1), odd ones by key-y (sandbox.stop on sbx-2).
audit::event_record recent_event(const std::string& org_id, std::int64_t seq, int second, bool even) {
  return even ? make_event(org_id, seq, ts_at(second), "key-x", "sandbox.exec", "sbx-1")
              : make_event(org_id, seq, ts_at(second), "key-y", "sandbox.stop", "sbx-2");
}

void recent_events(database& db, std::int64_t base) {
  for (int i = 1; i <= 20; ++i) append(db, recent_event("org-m", base + i, i, i % 2 == 0));
}

// Every kind of read, with cursors relative to `base`; returns the VM steps of each.
std::vector<int> measure_reads(database& db, statement_recorder& rec, std::int64_t base) {
  auto list = [&](audit_filter f) { REQUIRE(audit_store(db).list_audit_events("org-m", f)); };
  rec.take_audit_reads();
  REQUIRE(audit_store(db).audit_head_of("org-m"));
  list(audit_filter{base + 5, "", "", "", "", "", 4});
  list(audit_filter{base + 5, "", "", "key-x", "", "", 4});
  list(audit_filter{base + 5, "", "", "", "sandbox.exec", "", 4});
  list(audit_filter{base + 5, "", "", "", "", "sbx-1", 4});
  list(audit_filter{base + 5, "", "", "key-x", "sandbox.exec", "sbx-1", 100});
  // Values no old event has: the old ones are outside the range by field, not by cursor.
  list(audit_filter{0, "", "", "key-y", "", "", 4});
  list(audit_filter{0, "", "", "", "sandbox.stop", "", 4});
  list(audit_filter{0, "", "", "", "", "sbx-2", 4});
  list(audit_filter{0, ts_at(3), ts_at(12), "", "", "", 4});
  list(audit_filter{base + 6, ts_at(3), ts_at(12), "key-y", "", "", 100});
  list(audit_filter{0, ts_at(15), "", "", "", "", 100});
  // From the chain's start: the life-cycle index skips every exec row, old or recent.
  list(audit_filter{0, "", "", "", "", "", 4, true});
  REQUIRE(audit_store(db).scan_audit_events("org-m", base + 10,
                                            [&](const audit::event_record& e) { return e.seq < base + 13; }));
  std::vector<int> steps;
  for (auto& r : rec.take_audit_reads()) {
    INFO(r.sql);
    CHECK(r.full_scan_steps == 0);
    steps.push_back(r.vm_steps);
  }
  CHECK(steps.size() == 14);
  return steps;
}

}  // namespace

TEST_CASE("every audit read seeks an index: no table scan, no sort unless a time window asks for one") {
  testing::temp_dir dir;
  const auto path = dir.file("s.db");
  statement_recorder rec;
  auto db = open_db(path);
  recent_events(*db, 0);
  REQUIRE(audit_store(*db).insert_audit_checkpoint(checkpoint("org-m", 20)));
  rec.take_audit_reads();

  REQUIRE(audit_store(*db).audit_head_of("org-m"));
  for (const audit_filter& f :
       {audit_filter{}, audit_filter{3, "", "", "key-x", "", "", 9}, audit_filter{0, "", "", "", "sandbox.exec", "", 9},
        audit_filter{0, "", "", "", "", "sbx-1", 9}, audit_filter{0, "", "", "key-x", "sandbox.exec", "", 9},
        audit_filter{0, "", "", "key-x", "", "sbx-1", 9}, audit_filter{0, "", "", "", "", "", 9, true}})
    REQUIRE(audit_store(*db).list_audit_events("org-m", f));
  REQUIRE(audit_store(*db).scan_audit_events("org-m", 1, [](const audit::event_record&) { return true; }));
  REQUIRE(audit_store(*db).latest_audit_checkpoint("org-m"));
  REQUIRE(audit_store(*db).list_audit_checkpoints("org-m", 0, 10));
  REQUIRE(audit_store(*db).audit_org_ids());
  auto in_order = rec.take_audit_reads();
  for (const audit_filter& f : {audit_filter{0, ts_at(3), "", "", "", "", 9}, audit_filter{0, "", ts_at(3), "", "", "", 9},
                                audit_filter{0, ts_at(3), ts_at(9), "key-x", "sandbox.exec", "sbx-1", 9}})
    REQUIRE(audit_store(*db).list_audit_events("org-m", f));
  auto windowed = rec.take_audit_reads();
  // head, 7 lists, scan, 2 checkpoint reads, 2 org id seeks per table
  REQUIRE(in_order.size() == 15);
  REQUIRE(windowed.size() == 3);

  for (const auto& r : in_order) {
    auto plan = query_plan(path, r.sql);
    INFO(r.sql << "\n" << plan);
    CHECK(plan.find("SEARCH audit_") != std::string::npos);
    CHECK(plan.find("SCAN ") == std::string::npos);
    CHECK(plan.find("TEMP B-TREE") == std::string::npos);
  }
  const auto lifecycle = std::find_if(in_order.begin(), in_order.end(), [](const statement_run& r) {
    return r.sql.find("INDEXED BY audit_lifecycle") != std::string::npos;
  });
  REQUIRE(lifecycle != in_order.end());
  CHECK(query_plan(path, lifecycle->sql).find("SEARCH audit_events USING INDEX audit_lifecycle (org_id=? AND seq>?)") !=
        std::string::npos);
  for (const auto& r : windowed) {
    auto plan = query_plan(path, r.sql);
    INFO(r.sql << "\n" << plan);
    CHECK(plan.find("SEARCH audit_events USING INDEX audit_by_ts (org_id=? AND ts") != std::string::npos);
    CHECK(plan.find("SCAN ") == std::string::npos);
  }
}

namespace {

// org-m's 20 recent events after `old` older ones, days earlier (half like the recent even ones,
// half by key-old), amid `others` events like the recent ones in each of two organizations
// sorting before and after it.
std::unique_ptr<database> crowded_chain(const std::string& path, std::int64_t old, int others) {
  auto db = open_db(path);
  for (std::int64_t i = 1; i <= old; ++i) {
    auto e = make_event("org-m", i, ts_at(static_cast<int>(i), 3), "key-old", "sandbox.old", "sbx-old");
    if (i % 2 == 0) e = make_event("org-m", i, ts_at(static_cast<int>(i), 3), "key-x", "sandbox.exec", "sbx-1");
    append(*db, e);
  }
  for (const char* other : {"org-a", "org-z"})
    for (int i = 1; i <= others; ++i) append(*db, recent_event(other, i, 1 + i % 20, i % 2 == 0));
  recent_events(*db, old);
  return db;
}

}  // namespace

TEST_CASE("what an audit read costs does not grow with other organizations' events or with old ones") {
  testing::temp_dir dir;
  statement_recorder rec;
  // Both have neighbours on every side, so the step that finds a range's end is the same.
  auto few = crowded_chain(dir.file("few.db"), 4, 4);
  auto few_steps = measure_reads(*few, rec, 4);
  auto many = crowded_chain(dir.file("many.db"), 400, 300);
  auto many_steps = measure_reads(*many, rec, 400);
  CHECK(many_steps == few_steps);
}

// --- transactions ---

TEST_CASE("a transaction holds the write lock from begin, others get unavailable, not a long wait") {
  testing::temp_dir dir;
  const auto path = dir.file("s.db");
  auto db = open_db(path);
  auto other = open_db(path);
  other->set_busy_timeout(std::chrono::milliseconds(20));
  {
    auto tx = db->begin();
    REQUIRE(tx);
    append(*db, make_event("org-a", 1, ts_at(1)));

    auto second = other->begin();
    REQUIRE_FALSE(second);
    CHECK(second.err().code == errc::unavailable);
    auto write = audit_store(*other).insert_audit_event(make_event("org-a", 2, ts_at(2)));
    REQUIRE_FALSE(write);
    CHECK(write.err().code == errc::unavailable);
    // Readers go on, and see only what is committed.
    auto head = audit_store(*other).audit_head_of("org-a");
    REQUIRE(head);
    CHECK(head->seq == 0);
    REQUIRE(tx->commit());
  }
  CHECK(audit_store(*other).audit_head_of("org-a")->seq == 1);
  CHECK(other->begin().ok());
}

TEST_CASE("begin is unavailable while another connection holds the write lock") {
  testing::temp_dir dir;
  const auto path = dir.file("s.db");
  auto db = open_db(path);
  db->set_busy_timeout(std::chrono::milliseconds(20));
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  auto blocked = db->begin();
  REQUIRE_FALSE(blocked);
  CHECK(blocked.err().code == errc::unavailable);
  REQUIRE(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  // The failed begin left nothing open behind.
  auto tx = db->begin();
  REQUIRE(tx);
  append(*db, make_event("org-a", 1, ts_at(1)));
  REQUIRE(tx->commit());
  CHECK(audit_store(*open_db(path)).audit_head_of("org-a")->seq == 1);
}

TEST_CASE("transactions do not nest, commit once, and move without a second rollback") {
  testing::temp_dir dir;
  const auto path = dir.file("s.db");
  auto db = open_db(path);

  SECTION("a second begin on the same connection is refused while one is open") {
    auto tx = db->begin();
    REQUIRE(tx);
    auto nested = db->begin();
    REQUIRE_FALSE(nested);
    CHECK(nested.err().code == errc::internal);
    append(*db, make_event("org-a", 1, ts_at(1)));
    REQUIRE(tx->commit());
    CHECK(db->begin().ok());
  }
  SECTION("committing twice is an error, and the first commit stands") {
    auto tx = db->begin();
    REQUIRE(tx);
    append(*db, make_event("org-a", 1, ts_at(1)));
    REQUIRE(tx->commit());
    auto again = tx->commit();
    REQUIRE_FALSE(again);
    CHECK(again.err().code == errc::internal);
    CHECK(audit_store(*open_db(path)).audit_head_of("org-a")->seq == 1);
  }
  SECTION("a moved transaction is committed or rolled back once, by its new owner") {
    std::optional<transaction> owner;
    {
      auto tx = db->begin();
      REQUIRE(tx);
      append(*db, make_event("org-a", 1, ts_at(1)));
      owner.emplace(std::move(*tx));
    }  // the moved-from one is destroyed here without rolling back
    CHECK(audit_store(*db).audit_head_of("org-a")->seq == 1);
    append(*db, make_event("org-a", 2, ts_at(2)));
    owner.reset();
    CHECK(audit_store(*db).audit_head_of("org-a")->seq == 0);
    // Nothing is left open: a plain write commits on its own.
    append(*db, make_event("org-a", 1, ts_at(1)));
    CHECK(audit_store(*open_db(path)).audit_head_of("org-a")->seq == 1);
  }
}

// --- a killed process ---

namespace {

enum class stop_at { after_begin, after_change, after_event, after_commit };
enum class death { exit, sigkill };

// The child: a change and its event in one transaction, up to `at`; then tells the parent
// through `ready` and dies as asked. Catch2 is not used here: a failed step exits with its number.
[[noreturn]] void child(const std::string& path, const sandbox_record& s, const audit::event_record& e, stop_at at,
                        death how, int ready) {
  auto db = database::open(path);
  if (!db) ::_exit(10);
  auto tx = (*db)->begin();
  if (!tx) ::_exit(11);
  if (at >= stop_at::after_change) {
    // Larger than the page cache (16 MiB: configure() in database.cpp), so uncommitted pages
    // reach the WAL file before the end.
    auto big = s;
    big.id = new_id("sbx-");
    big.name = "big";
    big.spec_json = std::string(24 << 20, 'x');
    if (!sandbox_store(*(*db)).insert_sandbox(big) || !sandbox_store(*(*db)).insert_sandbox(s)) ::_exit(12);
  }
  if (at >= stop_at::after_event && !audit_store(*(*db)).insert_audit_event(e)) ::_exit(13);
  if (at >= stop_at::after_commit && !tx->commit()) ::_exit(14);
  char byte = 1;
  if (::write(ready, &byte, 1) != 1) ::_exit(15);
  if (how == death::exit) ::_exit(0);
  for (;;) ::pause();  // until SIGKILL
}

// Runs the child and waits for it to die; true when it reached `at`.
bool run_child(const std::string& path, const sandbox_record& s, const audit::event_record& e, stop_at at, death how,
               std::uintmax_t& wal_bytes_at_death) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    child(path, s, e, at, how, fds[1]);
  }
  ::close(fds[1]);
  char byte = 0;
  bool reached = ::read(fds[0], &byte, 1) == 1;
  ::close(fds[0]);
  if (reached && how == death::sigkill) REQUIRE(::kill(pid, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("child status " << status);
  if (how == death::sigkill && reached) CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  else CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  struct stat wal {};
  wal_bytes_at_death = ::stat((path + "-wal").c_str(), &wal) == 0 ? static_cast<std::uintmax_t>(wal.st_size) : 0;
  return reached;
}

}  // namespace

TEST_CASE("a process killed inside a transaction leaves neither the change nor its event, after commit both") {
  auto how = GENERATE(death::exit, death::sigkill);
  auto at = GENERATE(stop_at::after_begin, stop_at::after_change, stop_at::after_event, stop_at::after_commit);
  testing::temp_dir dir;
  const auto path = dir.file("sandfort.db");
  std::string org_id;
  {
    auto db = open_db(path);
    org_id = org_store(*db).create_org("acme", false, t0)->id;
  }  // closed: the child must not inherit an open connection

  sandbox_record s;
  s.id = new_id("sbx-");
  s.org_id = org_id;
  s.name = "web";
  s.state = "creating";
  s.snapshot = "ubuntu:24.04";
  s.spec_json = "{}";
  s.created_at = t0;
  s.updated_at = t0;
  auto e = make_event(org_id, 1, t0, "key-a", "sandbox.create", s.id);

  std::uintmax_t wal_bytes = 0;
  INFO("stop " << static_cast<int>(at) << ", death " << static_cast<int>(how));
  REQUIRE(run_child(path, s, e, at, how, wal_bytes));
  // Uncommitted pages were on disk when the child died, and still do not count.
  if (at == stop_at::after_change || at == stop_at::after_event) CHECK(wal_bytes > (1u << 20));

  auto db = open_db(path);
  const bool committed = at == stop_at::after_commit;
  CHECK(sandbox_store(*db).get_sandbox(org_id, s.id).ok() == committed);
  CHECK(sandbox_store(*db).get_sandbox(org_id, "big").ok() == committed);
  auto head = audit_store(*db).audit_head_of(org_id);
  REQUIRE(head);
  CHECK(head->seq == (committed ? 1 : 0));
  if (committed) CHECK(head->hash == e.hash);

  // The lock died with the child: this connection writes at once, and the file is sound.
  db->set_busy_timeout(std::chrono::milliseconds(0));
  auto tx = db->begin();
  REQUIRE(tx);
  append(*db, make_event(org_id, committed ? 2 : 1, t0));
  REQUIRE(tx->commit());
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(raw, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "ok");
  sqlite3_finalize(st);
  sqlite3_close(raw);
}
