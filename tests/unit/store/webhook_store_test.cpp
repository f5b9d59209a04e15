// Webhooks and their delivery log (store/webhook_store.hpp): rows scoped by organization, the
// cursor moved only from where the taker read it, one pending row taken at a time, the log read
// backwards by page, and finished rows pruned by age.
#include <catch2/catch.hpp>

#include "sandfort/store/org_store.hpp"
#include "sandfort/store/webhook_store.hpp"
#include "open_db.hpp"
#include "rows.hpp"
#include "temp_dir.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

namespace {

webhook_record hook_row(const std::string& org_id, const std::string& id, std::int64_t cursor = 0) {
  return webhook_record{org_id, id, "https://hooks.example/in", "[]", "", true, "v1.sealed", "k1", cursor, t0, t0};
}

webhook_delivery taken(const std::string& org_id, const std::string& id, std::int64_t seq) {
  webhook_delivery d;
  d.org_id = org_id;
  d.webhook_id = id;
  d.seq = seq;
  d.type = "sandbox.created";
  d.state = "pending";
  d.next_attempt_ms = 1000;
  d.created_at = t0;
  return d;
}

}  // namespace

TEST_CASE("webhooks: scoped by organization, changed in place, deleted with their log") {
  temp_dir dir;
  auto db = open_db(dir.file("t.db"));
  auto a = make_org(*db, "a");
  auto b = make_org(*db, "b");
  webhook_store s(*db);
  REQUIRE(s.insert(hook_row(a.id, "whk-1")));
  REQUIRE(s.insert(hook_row(b.id, "whk-2")));
  CHECK(s.count(a.id).value() == 1);
  CHECK(s.get(b.id, "whk-1").err().code == errc::not_found);
  CHECK(s.remove(b.id, "whk-1").err().code == errc::not_found);
  webhook_update u;
  u.enabled = false;
  u.types_json = R"(["sandbox.stopped"])";
  REQUIRE(s.update(a.id, "whk-1", u, "t1"));
  auto got = s.get(a.id, "whk-1");
  REQUIRE(got);
  CHECK_FALSE(got->enabled);
  CHECK(got->types_json == R"(["sandbox.stopped"])");
  CHECK(got->url == "https://hooks.example/in");
  CHECK(got->updated_at == "t1");
  auto enabled = s.enabled_webhooks();
  REQUIRE(enabled);
  REQUIRE(enabled->size() == 1);
  CHECK(enabled->front().id == "whk-2");
  // A rotation that keeps the previous secret, then one that does not.
  REQUIRE(s.rotate_secret(b.id, "whk-2", "v1.second", "k1", 9000, "t2"));
  auto rotated = s.get(b.id, "whk-2").value();
  CHECK(rotated.sealed_secret == "v1.second");
  CHECK(rotated.previous_secret == "v1.sealed");
  CHECK(rotated.previous_until_ms == 9000);
  REQUIRE(s.rotate_secret(b.id, "whk-2", "v1.third", "k1", std::nullopt, "t3"));
  rotated = s.get(b.id, "whk-2").value();
  CHECK(rotated.sealed_secret == "v1.third");
  CHECK_FALSE(rotated.previous_secret);
  CHECK_FALSE(rotated.previous_until_ms);
  CHECK(s.rotate_secret(a.id, "whk-2", "v1.x", "k1", std::nullopt, "t4").err().code == errc::not_found);
  CHECK(s.count_sealed_by_other("k1").value() == 0);
  CHECK(s.count_sealed_by_other("k2").value() == 2);
  REQUIRE(s.take(a.id, "whk-1", 0, 5, taken(a.id, "whk-1", 5)));
  REQUIRE(s.remove(a.id, "whk-1"));
  CHECK(s.deliveries(a.id, "whk-1", 0, 10).value().empty());
}

TEST_CASE("webhooks: a take moves the cursor only from where it was read, the log pages backwards, pruning") {
  temp_dir dir;
  auto db = open_db(dir.file("t.db"));
  auto a = make_org(*db, "a");
  webhook_store s(*db);
  REQUIRE(s.insert(hook_row(a.id, "whk-1", 10)));
  // Another taker read cursor 10 too and moved it first: this one is refused, nothing inserted.
  REQUIRE(s.take(a.id, "whk-1", 10, 12, taken(a.id, "whk-1", 12)));
  auto late = s.take(a.id, "whk-1", 10, 11, taken(a.id, "whk-1", 11));
  REQUIRE_FALSE(late);
  CHECK(late.err().code == errc::conflict);
  CHECK(s.get(a.id, "whk-1").value().cursor == 12);
  auto head = s.pending(a.id, "whk-1");
  REQUIRE(head);
  REQUIRE(*head);
  CHECK((*head)->seq == 12);
  // Delivered: no pending row left; a cursor moved past events of no interest takes none.
  auto d = **head;
  d.state = "delivered";
  d.attempts = 2;
  d.last_status = 200;
  d.next_attempt_ms.reset();
  d.finished_ms = 5000;
  d.delivered_at = "t2";
  REQUIRE(s.record_attempt(d));
  CHECK_FALSE(s.pending(a.id, "whk-1").value());
  REQUIRE(s.take(a.id, "whk-1", 12, 20, std::nullopt));
  for (std::int64_t seq : {21, 22, 23}) {
    REQUIRE(s.take(a.id, "whk-1", seq - 1, seq, taken(a.id, "whk-1", seq)));
    auto f = taken(a.id, "whk-1", seq);
    f.state = "failed";
    f.finished_ms = 9000;
    REQUIRE(s.record_attempt(f));
  }
  auto first = s.deliveries(a.id, "whk-1", 0, 2).value();
  REQUIRE(first.size() == 2);
  CHECK(first[0].seq == 23);
  CHECK(first[1].seq == 22);
  auto rest = s.deliveries(a.id, "whk-1", 22, 10).value();
  REQUIRE(rest.size() == 2);
  CHECK(rest[0].seq == 21);
  CHECK(rest[1].seq == 12);
  CHECK(rest[1].attempts == 2);
  CHECK(rest[1].last_status == 200);
  CHECK(rest[1].delivered_at == "t2");
  // Finished before 6000: only seq 12.
  CHECK(s.prune_finished(6000, 100).value() == 1);
  CHECK(s.deliveries(a.id, "whk-1", 0, 10).value().size() == 3);
}
