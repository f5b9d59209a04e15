// Sandboxes by state for GET /metrics: counted from live rows only. The count is the same with
// and without 20,000 deleted rows, its plan reads only the live-only index, and the work it does
// (SQLite VM steps) does not grow with the history.
#include <catch2/catch.hpp>
#include <map>

#include "../store/plan_rules.hpp"
#include "../store/temp_dir.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"

using namespace sandfort;
using namespace sandfort::store;

namespace {

constexpr const char* t0 = "2026-01-01T00:00:00.000Z";

struct store_with {
  testing::temp_dir dir;
  std::unique_ptr<database> db;

  explicit store_with(int deleted) {
    auto opened = database::open(dir.file("sandfort.db"));
    REQUIRE(opened);
    db = std::move(opened).value();
    auto o = org_store(*db).create_org("acme", false, t0);
    REQUIRE(o);
    auto tx = db->begin();
    REQUIRE(tx);
    const std::pair<const char*, int> live[] = {{"started", 5}, {"stopped", 3}, {"error", 1}, {"paused", 2}};
    int n = 0;
    for (const auto& [state, count] : live)
      for (int i = 0; i < count; ++i)
        REQUIRE(sandbox_store(*db).insert_sandbox(row(o->id, "live-" + std::to_string(n++), state)));
    for (int i = 0; i < deleted; ++i)
      REQUIRE(sandbox_store(*db).insert_sandbox(row(o->id, "old-" + std::to_string(i), "deleted")));
    REQUIRE(tx->commit());
  }

  static sandbox_record row(const std::string& org_id, const std::string& name, const std::string& state) {
    sandbox_record s;
    s.id = new_id("sbx-");
    s.org_id = org_id;
    s.name = name;
    s.state = state;
    s.snapshot = "sandfort/base:bookworm";
    s.spec_json = "{}";
    s.created_at = t0;
    s.updated_at = t0;
    return s;
  }

  std::map<std::string, std::int64_t> counts() {
    auto c = sandbox_store(*db).count_live_sandboxes_by_state();
    REQUIRE(c);
    return {c->begin(), c->end()};
  }
};

}  // namespace

TEST_CASE("sandbox counts: live rows by state, however long the history", "[metrics]") {
  store_with empty(0);
  store_with history(20000);
  const std::map<std::string, std::int64_t> expected = {{"error", 1}, {"paused", 2}, {"started", 5}, {"stopped", 3}};
  CHECK(empty.counts() == expected);
  CHECK(history.counts() == expected);

  // The same work in both stores (from a warm statement cache).
  auto steps = [](store_with& s) {
    (void)s.counts();
    auto before = s.db->stats().vm_steps;
    (void)s.counts();
    return s.db->stats().vm_steps - before;
  };
  auto without = steps(empty);
  auto with = steps(history);
  INFO("VM steps without history " << without << ", with " << with);
  CHECK(with <= without + without / 10);
}

TEST_CASE("sandbox counts: the plan reads the live-only index", "[metrics]") {
  store_with s(0);
  auto plans = s.db->explain_request_paths();
  REQUIRE(plans);
  bool found = false;
  for (const auto& p : *plans) {
    if (p.name != "live sandboxes by state (metrics)") continue;
    found = true;
    std::string text;
    for (const auto& step : p.steps) text += step + "\n";
    INFO(text);
    CHECK(text.find("USING INDEX sandboxes_live_by_org") != std::string::npos);
    for (const auto& step : p.steps) CHECK_FALSE(testing::reads_history(step));
  }
  CHECK(found);
}
