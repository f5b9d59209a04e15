// Snapshots over the fakes: the commit under a random name, the row after the image (and the
// image removed again when the row fails), creates from a snapshot, the 409 while one is used,
// organization scoping and the refusal of a snapshot image's own name.

#include <catch2/catch.hpp>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

TEST_CASE("snapshot: committed under a random image name, usable by its organization only", "[sandbox][snapshots]") {
  fixture f;
  auto box = f.create_started();
  auto s = make_snapshot(f, f.org_a.id, box.id, "base");
  REQUIRE(s);
  CHECK(is_id(s->id, "snap-"));
  CHECK(s->size_bytes == 1024);
  CHECK(s->source_sandbox_id == box.id);
  REQUIRE(f.engine.commits.size() == 1);
  const std::string image = f.engine.commits[0];
  CHECK(image.rfind(std::string(snapshot_repository) + "/", 0) == 0);
  CHECK(image.find("base") == std::string::npos);
  CHECK(image.find(f.org_a.id) == std::string::npos);
  // The sandbox keeps running: the commit is the daemon's own operation, not a state change.
  CHECK(f.get(f.org_a.id, box.id)->state == "started");

  // Its organization creates from it by name; another does not find it, by name or image.
  create_request from;
  from.snapshot = "base";
  from.wait = true;
  auto made = f.create(f.org_a.id, from);
  REQUIRE(made);
  CHECK(made->snapshot == "base");
  CHECK(f.engine.created.back().image == f.engine.image_by_name(image)->id);
  CHECK(f.svc->snapshots().get(f.org_b.id, "base").err().code == errc::not_found);
  create_request guessed;
  guessed.snapshot = image;
  guessed.wait = true;
  CHECK(f.create(f.org_b.id, guessed).err().code == errc::not_found);

  // In use: 409, and the image stays; once the sandbox is gone it can be deleted.
  auto refused = f.run(f.svc->snapshots().remove(f.org_a.id, "base", audit::system_actor()));
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::conflict);
  CHECK(f.engine.images.count(image) == 1);
  REQUIRE(f.run(f.svc->remove(f.org_a.id, made->id)));
  REQUIRE(f.run(f.svc->snapshots().remove(f.org_a.id, "base", audit::system_actor())));
  CHECK(f.engine.images.count(image) == 0);
  CHECK(f.svc->snapshots().get(f.org_a.id, "base").err().code == errc::not_found);
}

TEST_CASE("snapshot: bad names, taken names and sandboxes that cannot be snapshotted are refused",
          "[sandbox][snapshots]") {
  fixture f;
  auto box = f.create_started();
  for (const char* bad : {"", "snap-1234", "has space", "-dash"})
    CHECK(make_snapshot(f, f.org_a.id, box.id, bad).err().code == errc::invalid_argument);
  CHECK(make_snapshot(f, f.org_a.id, "sbx-0000000000000000", "x").err().code == errc::not_found);
  CHECK(make_snapshot(f, f.org_b.id, box.id, "x").err().code == errc::not_found);  // not theirs
  REQUIRE(make_snapshot(f, f.org_a.id, box.id, "once"));
  CHECK(make_snapshot(f, f.org_a.id, box.id, "once").err().code == errc::conflict);
  CHECK(f.engine.commits.size() == 1);  // a taken name never reaches Docker
}
