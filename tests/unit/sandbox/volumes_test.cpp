// Volumes over the fakes: Docker's volume before the row (and removed again when the row fails),
// mounts at create, the 409 while mounted, organization scoping.

#include <catch2/catch.hpp>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

result<void> delete_volume(fixture& f, const std::string& org_id, const std::string& name) {
  return f.run(f.svc->volumes().remove(org_id, name, audit::system_actor()));
}

}  // namespace

TEST_CASE("volume: created on Docker with a random name and labels that do not name the organization",
          "[sandbox][volumes]") {
  fixture f;
  auto v = make_volume(f, f.org_a.id, "cache");
  REQUIRE(v);
  CHECK(is_id(v->id, "vol-"));
  REQUIRE(f.engine.volumes.size() == 1);
  const auto& [docker_name, info] = *f.engine.volumes.begin();
  CHECK(docker_name.rfind("sandfort-vol-", 0) == 0);
  CHECK(docker_name.find("cache") == std::string::npos);
  CHECK(info.labels.at("io.sandfort.volume") == v->id);
  for (const auto& [k, val] : info.labels) CHECK(val.find(f.org_a.id) == std::string::npos);

  // Another organization: not found, and free to have its own "cache".
  CHECK(f.svc->volumes().get(f.org_b.id, "cache").err().code == errc::not_found);
  CHECK(f.svc->volumes().get(f.org_b.id, v->id).err().code == errc::not_found);
  CHECK(delete_volume(f, f.org_b.id, "cache").err().code == errc::not_found);
  REQUIRE(make_volume(f, f.org_b.id, "cache"));
  CHECK(make_volume(f, f.org_a.id, "cache").err().code == errc::conflict);
}

TEST_CASE("volume: size_mb and bad names are refused before Docker is asked", "[sandbox][volumes]") {
  fixture f;
  volume_create_request req;
  req.name = "sized";
  req.size_mb = 100;
  auto r = f.run(f.svc->volumes().create(f.org_a.id, req, audit::system_actor()));
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::invalid_argument);
  CHECK(r.err().message.find("not enforced") != std::string::npos);
  for (const char* bad : {"", "-a", "vol-1", "a b"}) CHECK(make_volume(f, f.org_a.id, bad).err().code == errc::invalid_argument);
  CHECK(f.engine.volumes.empty());
}

TEST_CASE("volume: a failed Docker create leaves no row", "[sandbox][volumes]") {
  fixture f;
  f.engine.volume_create_error = make_error(errc::unavailable, "Docker is unreachable (fake)");
  CHECK(make_volume(f, f.org_a.id, "cache").err().code == errc::unavailable);
  CHECK(f.svc->volumes().get(f.org_a.id, "cache").err().code == errc::not_found);
}

TEST_CASE("volume: mounted at create, 409 while a sandbox holds it, gone from Docker after", "[sandbox][volumes]") {
  fixture f;
  auto v = make_volume(f, f.org_a.id, "cache");
  REQUIRE(v);
  create_request req;
  req.volumes = {{"cache", "/data", true}};
  auto s = f.create_started(req);
  REQUIRE(s.spec.volumes.size() == 1);
  CHECK(s.spec.volumes[0].mount_path == "/data");
  REQUIRE(f.engine.created.size() == 1);
  const auto& mounts = f.engine.created.back().volumes;
  REQUIRE(mounts.size() == 1);
  CHECK(mounts[0].volume == f.engine.volumes.begin()->first);
  CHECK(mounts[0].container_path == "/data");
  CHECK(mounts[0].read_only);
  CHECK(mounts[0].no_copy);

  auto refused = delete_volume(f, f.org_a.id, "cache");
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::conflict);
  CHECK(f.engine.volumes.size() == 1);
  CHECK(f.svc->volumes().get(f.org_a.id, "cache")->state == "ready");

  REQUIRE(f.run(f.svc->remove(f.org_a.id, s.id)));
  REQUIRE(delete_volume(f, f.org_a.id, "cache"));
  CHECK(f.engine.volumes.empty());
  CHECK(f.svc->volumes().get(f.org_a.id, "cache").err().code == errc::not_found);
}

TEST_CASE("volume: another organization's volume cannot be mounted, bad mounts are refused", "[sandbox][volumes]") {
  fixture f;
  REQUIRE(make_volume(f, f.org_a.id, "cache"));
  create_request req;
  req.wait = true;
  req.volumes = {{"cache", "/data", false}};
  auto r = f.create(f.org_b.id, req);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::not_found);
  CHECK(r.err().message.find("cache") != std::string::npos);
  CHECK(f.engine.created.empty());

  for (const char* path : {"data", "/", "/proc/1", "/run/sandfort", "/run", "/.sandfort", "/a/../b", "/a/"}) {
    req.volumes = {{"cache", path, false}};
    CHECK(f.create(f.org_a.id, req).err().code == errc::invalid_argument);
  }
  req.volumes = {{"cache", "/a", false}, {"cache", "/b", false}};
  CHECK(f.create(f.org_a.id, req).err().code == errc::invalid_argument);
}

TEST_CASE("volume: Docker refusing the removal keeps the volume usable", "[sandbox][volumes]") {
  fixture f;
  REQUIRE(make_volume(f, f.org_a.id, "cache"));
  f.engine.volume_remove_error = make_error(errc::unavailable, "Docker is unreachable (fake)");
  CHECK(delete_volume(f, f.org_a.id, "cache").err().code == errc::unavailable);
  CHECK(f.svc->volumes().get(f.org_a.id, "cache")->state == "ready");
  f.engine.volume_remove_error.reset();
  REQUIRE(delete_volume(f, f.org_a.id, "cache"));
}
