// The journal and the failure summary over a real SQLite file: events appended with their change
// or not at all, and authentication failures counted into few events.
#include <catch2/catch.hpp>

#include "../store/open_db.hpp"
#include "../store/temp_dir.hpp"
#include "sandfort/audit/failure_summary.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/audit/verifier.hpp"
#include "support/manual_clock.hpp"

using namespace sandfort;

namespace {

struct journal_fixture {
  testing::temp_dir dir;
  std::unique_ptr<store::database> db = testing::open_db(dir.file("sandfort.db"));
  testing::manual_clock clk;
  audit::journal journal{*db, clk};

  std::vector<audit::event_record> events(const std::string& org_id) {
    store::audit_filter f;
    f.limit = 1000;
    auto list = store::audit_store(*db).list_audit_events(org_id, f);
    REQUIRE(list);
    return *list;
  }
};

}  // namespace

TEST_CASE("journal: a change that fails leaves no event, one that succeeds has exactly one") {
  journal_fixture f;
  auto o = store::org_store(*f.db).create_org("acme", false, "t");
  REQUIRE(o);
  audit::actor who{"key:key-1", "req-1", "10.0.0.9"};
  auto failed = f.journal.record_change(
      {o->id}, who, [&]() -> result<void> { return make_error(errc::conflict, "no"); },
      [] { return audit::record{"x.fail", "t"}; });
  CHECK_FALSE(failed);
  CHECK(f.events(o->id).empty());

  auto done = f.journal.record_change(
      {o->id}, who, [&] { return store::org_store(*f.db).set_org_state(o->id, "disabled", {"active"}, "t2"); },
      [] { return audit::record{"org.disable", "org-x", "ok", {{"ratio", 0.5}}}; });
  // A float has no canonical form: the whole change is refused, the state is unchanged.
  CHECK_FALSE(done);
  CHECK(store::org_store(*f.db).get_org(o->id)->state == "active");
  CHECK(f.events(o->id).empty());

  REQUIRE(f.journal.record_change(
      {o->id}, who, [&] { return store::org_store(*f.db).set_org_state(o->id, "disabled", {"active"}, "t2"); },
      [] { return audit::record{"org.disable", "org-x", "ok", audit::floats_as_text({{"ratio", 0.5}})}; }));
  auto got = f.events(o->id);
  REQUIRE(got.size() == 1);
  CHECK(got[0].actor == "key:key-1");
  CHECK(got[0].source == "10.0.0.9");
  CHECK(got[0].details == R"({"ratio":"0.5"})");
  CHECK(store::org_store(*f.db).get_org(o->id)->state == "disabled");
}

TEST_CASE("failure summary: many failures become one event per source and reason, in the operator's chain") {
  journal_fixture f;
  audit::failure_summary failures(*f.db, f.journal, f.clk);
  for (int i = 0; i < 500; ++i) failures.note("10.0.0.1", "invalid API key");
  failures.note("10.0.0.2", "invalid token");
  // Not bootstrapped: nothing to write into yet, and nothing is lost.
  CHECK_FALSE(failures.flush());
  CHECK(failures.pending() == 2);

  auto op = store::org_store(*f.db).create_org("superadmin", true, "t");
  REQUIRE(op);
  auto written = failures.flush();
  REQUIRE(written);
  CHECK(*written == 2);
  CHECK(failures.pending() == 0);
  auto got = f.events(op->id);
  REQUIRE(got.size() == 2);
  CHECK(got[0].action == "auth.failures");
  CHECK(got[0].actor == "anonymous");
  CHECK(got[0].details.find(R"("count":500)") != std::string::npos);
  CHECK(*failures.flush() == 0);  // nothing new

  // A spray from many addresses cannot grow the tally without bound.
  for (int i = 0; i < 20000; ++i) failures.note("10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250), "x");
  CHECK(failures.pending() <= 10001);
}

TEST_CASE("journal: details with invalid UTF-8 (a raw request path, a cut character) are recorded with U+FFFD") {
  journal_fixture f;
  auto o = store::org_store(*f.db).create_org("acme", false, "t");
  REQUIRE(o);
  const std::string cut_e_acute = std::string("true \xc3\xa9\xc3", 8);  // "true é" and half of the next "é"
  auto e = f.journal.record_event(o->id, audit::system_actor(),
                                  {"sandbox.files.put", "sbx-1", "accepted", {{"path", "/files?path=/a\xff"}, {"command", cut_e_acute}}});
  REQUIRE(e);
  auto d = nlohmann::json::parse(e->details);
  CHECK(d["path"] == "/files?path=/a\xef\xbf\xbd");
  CHECK(d["command"] == "true \xc3\xa9\xef\xbf\xbd");
  audit::chain_verifier v(o->id);
  CHECK(v.feed(f.events(o->id).at(0)));
}
