// What volumes and snapshots share (named_resources.hpp), run for both kinds over the fakes:
// pages by name, lookups by id or name, the name rules and the taken name in the kind's words,
// the delete's audit record and a deleted one's name free again.

#include <catch2/catch.hpp>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

// A kind as these tests drive it: its words, its service, a create of organization A's.
struct volumes_kind {
  static constexpr const char* noun = "volume";
  static constexpr const char* id_prefix = "vol-";
  explicit volumes_kind(fixture& fx) : f(fx) {}
  fixture& f;
  volume_service& service() { return f.svc->volumes(); }
  result<volume_view> make(const std::string& name) { return make_volume(f, f.org_a.id, name); }
};

struct snapshots_kind {
  static constexpr const char* noun = "snapshot";
  static constexpr const char* id_prefix = "snap-";
  explicit snapshots_kind(fixture& fx) : f(fx), box(f.create_started().id) {}
  fixture& f;
  std::string box;  // what each snapshot is committed from
  snapshot_service& service() { return f.svc->snapshots(); }
  result<snapshot_view> make(const std::string& name) { return make_snapshot(f, f.org_a.id, box, name); }
};

// Organization A's audit events about one kind ("volume.create", "volume.delete", …), in order.
std::vector<audit::event_record> events_of_kind(fixture& f, const std::string& noun) {
  store::audit_filter every;
  every.limit = 1000;
  auto list = store::audit_store(*f.db).list_audit_events(f.org_a.id, every);
  REQUIRE(list);
  std::vector<audit::event_record> out;
  for (auto& e : *list)
    if (e.action.starts_with(noun + ".")) out.push_back(std::move(e));
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("named resources: listed by name a page at a time, found by id or name, in their organization only",
                   "[sandbox][volumes][snapshots]", volumes_kind, snapshots_kind) {
  fixture f;
  TestType kind(f);
  for (const char* name : {"c", "a", "b"}) REQUIRE(kind.make(name));

  name_page_request req;
  req.limit = 2;
  auto first = kind.service().list(f.org_a.id, req);
  REQUIRE(first);
  REQUIRE(first->items.size() == 2);
  CHECK(first->items[0].name == "a");
  CHECK(first->items[1].name == "b");
  CHECK(first->next_cursor == "b");
  req.cursor = first->next_cursor;
  auto rest = kind.service().list(f.org_a.id, req);
  REQUIRE(rest);
  REQUIRE(rest->items.size() == 1);
  CHECK(rest->items[0].name == "c");
  CHECK(rest->next_cursor.empty());
  // A page that holds them all has no cursor.
  req = {};
  req.limit = 3;
  auto whole = kind.service().list(f.org_a.id, req);
  REQUIRE(whole);
  CHECK(whole->items.size() == 3);
  CHECK(whole->next_cursor.empty());

  auto by_id = kind.service().get(f.org_a.id, first->items[0].id);
  REQUIRE(by_id);
  CHECK(by_id->name == "a");
  CHECK(by_id->state == "ready");
  CHECK(kind.service().get(f.org_a.id, "a")->id == first->items[0].id);
  auto others = kind.service().list(f.org_b.id, name_page_request{});
  REQUIRE(others);
  CHECK(others->items.empty());
}

TEMPLATE_TEST_CASE("named resources: a bad name names the kind's id prefix, a taken one the kind",
                   "[sandbox][volumes][snapshots]", volumes_kind, snapshots_kind) {
  fixture f;
  TestType kind(f);
  const std::string prefix = TestType::id_prefix;
  for (const std::string& bad : {prefix + "x", std::string(64, 'a'), std::string("a/b")}) {
    auto r = kind.make(bad);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::invalid_argument);
    CHECK(r.err().message ==
          "name must be 1-63 characters of letters, digits, '-', '_', '.', start with a letter or digit, and not "
          "start with '" + prefix + "'");
  }
  REQUIRE(kind.make(std::string(63, 'a')));
  REQUIRE(kind.make("x.y_z-1"));
  auto taken = kind.make("x.y_z-1");
  REQUIRE_FALSE(taken);
  CHECK(taken.err().code == errc::conflict);
  CHECK(taken.err().message == std::string(TestType::noun) + " name 'x.y_z-1' is already used");
}

TEMPLATE_TEST_CASE("named resources: a delete is audited in the kind's words and frees the name",
                   "[sandbox][volumes][snapshots]", volumes_kind, snapshots_kind) {
  fixture f;
  TestType kind(f);
  auto made = kind.make("gone");
  REQUIRE(made);
  REQUIRE(f.run(kind.service().remove(f.org_a.id, made->id, audit::system_actor())));

  const std::string noun = TestType::noun;
  const auto audited = events_of_kind(f, noun);
  REQUIRE(audited.size() == 2);
  CHECK(audited[0].action == noun + ".create");
  CHECK(audited[1].action == noun + ".delete");
  CHECK(audited[1].target == made->id);
  CHECK(nlohmann::json::parse(audited[1].details)["name"] == "gone");
  CHECK(kind.service().get(f.org_a.id, made->id).err().code == errc::not_found);
  CHECK(f.run(kind.service().remove(f.org_a.id, "gone", audit::system_actor())).err().code == errc::not_found);

  auto again = kind.make("gone");
  REQUIRE(again);
  CHECK(again->id != made->id);
  auto listed = kind.service().list(f.org_a.id, name_page_request{});
  REQUIRE(listed);
  REQUIRE(listed->items.size() == 1);
  CHECK(listed->items[0].id == again->id);
}
