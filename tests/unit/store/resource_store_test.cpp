// Volumes and snapshots in the store (store/resource_store.hpp): names per organization, mounts
// of live sandboxes only.
#include <catch2/catch.hpp>
#include <set>

#include "sandfort/core/ids.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/resource_store.hpp"
#include "sandfort/store/sandbox_store.hpp"
#include "temp_dir.hpp"
#include "open_db.hpp"
#include "rows.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using namespace sandfort::store;

namespace {

struct store_fixture {
  testing::temp_dir dir;
  std::unique_ptr<database> db = open_db(dir.file("sandfort.db"));
  std::string org_a = org_store(*db).create_org("a", false, t0)->id;
  std::string org_b = org_store(*db).create_org("b", false, t0)->id;
};

volume_record volume(const std::string& org_id, const std::string& name) {
  volume_record v;
  v.id = new_id("vol-");
  v.org_id = org_id;
  v.name = name;
  v.docker_name = "sandfort-vol-" + random_hex(8);
  v.state = "ready";
  v.created_at = v.updated_at = t0;
  return v;
}

snapshot_record snapshot(const std::string& org_id, const std::string& name) {
  snapshot_record s;
  s.id = new_id("snap-");
  s.org_id = org_id;
  s.name = name;
  s.image_ref = "sandfort-snap/" + random_hex(8) + ":latest";
  s.source_sandbox_id = "sbx-0000000000000001";
  s.state = "ready";
  s.created_at = s.updated_at = t0;
  return s;
}

}  // namespace

TEST_CASE("volume names are per organization and free again once deleted") {
  store_fixture f;
  auto a = volume(f.org_a, "cache");
  REQUIRE(resource_store(*f.db).insert_volume(a));
  auto again = resource_store(*f.db).insert_volume(volume(f.org_a, "cache"));
  REQUIRE_FALSE(again);
  CHECK(again.err().code == errc::conflict);
  auto b = volume(f.org_b, "cache");
  REQUIRE(resource_store(*f.db).insert_volume(b));

  CHECK(resource_store(*f.db).get_volume(f.org_a, "cache")->id == a.id);
  CHECK(resource_store(*f.db).get_volume(f.org_a, a.id)->name == "cache");
  CHECK(resource_store(*f.db).get_volume(f.org_b, "cache")->id == b.id);
  CHECK(resource_store(*f.db).get_volume(f.org_b, a.id).err().code == errc::not_found);  // another organization's id

  REQUIRE(resource_store(*f.db).set_volume_state(f.org_a, a.id, "deleting", {"ready"}, t0));
  CHECK(resource_store(*f.db).set_volume_state(f.org_a, a.id, "deleting", {"ready"}, t0).err().code == errc::conflict);
  CHECK(resource_store(*f.db).set_volume_state(f.org_b, a.id, "deleted", {"deleting"}, t0).err().code ==
        errc::not_found);
  REQUIRE(resource_store(*f.db).set_volume_state(f.org_a, a.id, "deleted", {"deleting"}, t0));
  CHECK(resource_store(*f.db).get_volume(f.org_a, "cache").err().code == errc::not_found);
  CHECK(resource_store(*f.db).insert_volume(volume(f.org_a, "cache")));
}

TEST_CASE("volumes list by name with a cursor") {
  store_fixture f;
  for (const char* n : {"c", "a", "b"}) REQUIRE(resource_store(*f.db).insert_volume(volume(f.org_a, n)));
  REQUIRE(resource_store(*f.db).insert_volume(volume(f.org_b, "z")));
  auto first = resource_store(*f.db).list_volumes(f.org_a, "", 2);
  REQUIRE(first);
  REQUIRE(first->size() == 2);
  CHECK((*first)[0].name == "a");
  CHECK((*first)[1].name == "b");
  auto rest = resource_store(*f.db).list_volumes(f.org_a, "b", 2);
  REQUIRE(rest);
  REQUIRE(rest->size() == 1);
  CHECK((*rest)[0].name == "c");
}

TEST_CASE("a volume is mounted while a sandbox that is not deleted links it") {
  store_fixture f;
  auto v = volume(f.org_a, "cache");
  REQUIRE(resource_store(*f.db).insert_volume(v));
  auto s = sandbox(f.org_a);
  REQUIRE(sandbox_store(*f.db).insert_sandbox(s));
  CHECK_FALSE(*resource_store(*f.db).volume_mounted_by(v.id));
  REQUIRE(resource_store(*f.db).insert_sandbox_volume(s.id, v.id, "/data", true));

  auto mounts = resource_store(*f.db).list_sandbox_volumes(s.id);
  REQUIRE(mounts);
  REQUIRE(mounts->size() == 1);
  CHECK((*mounts)[0].docker_name == v.docker_name);
  CHECK((*mounts)[0].volume_name == "cache");
  CHECK((*mounts)[0].mount_path == "/data");
  CHECK((*mounts)[0].read_only);

  s.state = "stopped";
  REQUIRE(sandbox_store(*f.db).update_sandbox(s));
  CHECK(*resource_store(*f.db).volume_mounted_by(v.id) == s.id);  // a stopped one mounts it again at start
  s.state = "deleted";
  REQUIRE(sandbox_store(*f.db).update_sandbox(s));
  CHECK_FALSE(*resource_store(*f.db).volume_mounted_by(v.id));
  CHECK(resource_store(*f.db).list_sandbox_volumes(s.id)->empty());
  // Pruning the deleted row is not held up by its mounts.
  CHECK(sandbox_store(*f.db).prune_deleted_sandboxes("9999-01-01T00:00:00.000Z", 10));
}

TEST_CASE("reconciliation reads the live volumes and snapshots of every organization, from live-only indexes") {
  store_fixture f;
  auto a = volume(f.org_a, "cache");
  auto b = volume(f.org_b, "cache");
  auto gone = volume(f.org_a, "old");
  REQUIRE(resource_store(*f.db).insert_volume(a));
  REQUIRE(resource_store(*f.db).insert_volume(b));
  REQUIRE(resource_store(*f.db).insert_volume(gone));
  REQUIRE(resource_store(*f.db).set_volume_state(f.org_a, gone.id, "deleting", {"ready"}, t0));
  auto deleting = resource_store(*f.db).list_live_volumes_all_orgs();
  REQUIRE(deleting);
  CHECK(deleting->size() == 3);  // a deleting row is still live: its Docker volume may be there
  REQUIRE(resource_store(*f.db).set_volume_state(f.org_a, gone.id, "deleted", {"deleting"}, t0));
  auto live = resource_store(*f.db).list_live_volumes_all_orgs();
  REQUIRE(live);
  std::set<std::string> ids;
  for (const auto& v : *live) ids.insert(v.id);
  CHECK(ids == std::set<std::string>{a.id, b.id});

  auto snap = [&](const std::string& org_id, const std::string& name) {
    auto s = snapshot(org_id, name);
    REQUIRE(resource_store(*f.db).insert_snapshot(s));
    return s;
  };
  auto s1 = snap(f.org_a, "base");
  auto s2 = snap(f.org_b, "base");
  auto s3 = snap(f.org_b, "old");
  REQUIRE(resource_store(*f.db).set_snapshot_state(f.org_b, s3.id, "deleting", {"ready"}, t0));
  REQUIRE(resource_store(*f.db).set_snapshot_state(f.org_b, s3.id, "deleted", {"deleting"}, t0));
  auto snaps = resource_store(*f.db).list_live_snapshots_all_orgs();
  REQUIRE(snaps);
  std::set<std::string> snap_ids;
  for (const auto& s : *snaps) snap_ids.insert(s.id);
  CHECK(snap_ids == std::set<std::string>{s1.id, s2.id});
  CHECK((*snaps)[0].image_ref.rfind("sandfort-snap/", 0) == 0);

  auto plans = f.db->explain_request_paths();
  REQUIRE(plans);
  int seen = 0;
  for (const auto& p : *plans) {
    if (p.name.find("(reconcile)") == std::string::npos) continue;
    ++seen;
    REQUIRE(p.steps.size() == 1);
    CHECK(p.steps[0].find("USING INDEX") != std::string::npos);
    CHECK(p.steps[0].find("_live_name") != std::string::npos);
  }
  CHECK(seen == 2);
}

TEST_CASE("the volume and snapshot quotas count live rows of one organization, whatever its history") {
  store_fixture f;
  auto snap = [&](const std::string& org_id, const std::string& name) {
    auto s = snapshot(org_id, name);
    REQUIRE(resource_store(*f.db).insert_snapshot(s));
    return s;
  };
  CHECK(*resource_store(*f.db).count_live_volumes(f.org_a) == 0);
  CHECK(*resource_store(*f.db).count_live_snapshots(f.org_a) == 0);
  auto a1 = volume(f.org_a, "one");
  auto a2 = volume(f.org_a, "two");
  REQUIRE(resource_store(*f.db).insert_volume(a1));
  REQUIRE(resource_store(*f.db).insert_volume(a2));
  REQUIRE(resource_store(*f.db).insert_volume(volume(f.org_b, "one")));
  auto s1 = snap(f.org_a, "base");
  snap(f.org_b, "base");
  snap(f.org_b, "more");
  CHECK(*resource_store(*f.db).count_live_volumes(f.org_a) == 2);
  CHECK(*resource_store(*f.db).count_live_volumes(f.org_b) == 1);
  CHECK(*resource_store(*f.db).count_live_snapshots(f.org_a) == 1);
  CHECK(*resource_store(*f.db).count_live_snapshots(f.org_b) == 2);
  // Deleting ones still count (their Docker object may be there); deleted ones do not.
  REQUIRE(resource_store(*f.db).set_volume_state(f.org_a, a1.id, "deleting", {"ready"}, t0));
  REQUIRE(resource_store(*f.db).set_snapshot_state(f.org_a, s1.id, "deleting", {"ready"}, t0));
  CHECK(*resource_store(*f.db).count_live_volumes(f.org_a) == 2);
  CHECK(*resource_store(*f.db).count_live_snapshots(f.org_a) == 1);
  REQUIRE(resource_store(*f.db).set_volume_state(f.org_a, a1.id, "deleted", {"deleting"}, t0));
  REQUIRE(resource_store(*f.db).set_snapshot_state(f.org_a, s1.id, "deleted", {"deleting"}, t0));
  CHECK(*resource_store(*f.db).count_live_volumes(f.org_a) == 1);
  CHECK(*resource_store(*f.db).count_live_snapshots(f.org_a) == 0);

  // The work of a count does not grow with deleted rows: 2,000 of each change nothing.
  auto steps = [&](auto count) {
    REQUIRE(count());  // compiled and cached
    const auto before = f.db->stats().vm_steps;
    auto n = count();
    REQUIRE(n);
    return std::pair{*n, f.db->stats().vm_steps - before};
  };
  auto volumes = [&] { return resource_store(*f.db).count_live_volumes(f.org_a); };
  auto snapshots = [&] { return resource_store(*f.db).count_live_snapshots(f.org_a); };
  const auto volumes_before = steps(volumes);
  const auto snapshots_before = steps(snapshots);
  {
    auto tx = f.db->begin();
    REQUIRE(tx);
    for (int i = 0; i < 2000; ++i) {
      auto v = volume(f.org_a, "old-" + std::to_string(i));
      v.state = "deleted";
      REQUIRE(resource_store(*f.db).insert_volume(v));
      auto s = snapshot(f.org_a, "old-" + std::to_string(i));
      s.state = "deleted";
      REQUIRE(resource_store(*f.db).insert_snapshot(s));
    }
    REQUIRE(tx->commit());
  }
  CHECK(steps(volumes) == volumes_before);
  CHECK(steps(snapshots) == snapshots_before);
  CHECK(volumes_before.first == 1);
  CHECK(snapshots_before.first == 0);

  auto plans = f.db->explain_request_paths();
  REQUIRE(plans);
  int seen = 0;
  for (const auto& p : *plans) {
    if (p.name != "live volumes of an organization (quotas)" && p.name != "live snapshots of an organization (quotas)")
      continue;
    ++seen;
    INFO(p.name);
    REQUIRE(p.steps.size() == 1);
    CHECK(p.steps[0].rfind("SEARCH ", 0) == 0);
    CHECK(p.steps[0].find("_live_name (org_id=?)") != std::string::npos);
  }
  CHECK(seen == 2);
}
