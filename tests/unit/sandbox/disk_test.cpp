// disk_mb: the host-side walker over trees hostile root wrote (allocated blocks, hard links once,
// symlinks never followed, bounded), the loop that stops a sandbox over its limit, hard
// enforcement's StorageOpt, and the organization's disk quota.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "fakes.hpp"
#include "sandfort/sandbox/disk_guard.hpp"
#include "sandfort/sandbox/disk_usage.hpp"
#include "sandfort/docker/messages.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t disk_test_mib = 1u << 20;

// A file whose blocks are allocated without a byte written (what `fallocate -l` does).
void allocate_file(const fs::path& p, off_t bytes) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::posix_fallocate(fd, 0, bytes) == 0);
  ::close(fd);
}

void write_file(const fs::path& p, std::size_t bytes) {
  std::ofstream out(p, std::ios::binary);
  std::string chunk(64 * 1024, 'x');
  for (std::size_t done = 0; done < bytes; done += chunk.size()) out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
}

tree_usage measure_one(const fs::path& root, walk_limits limits = {}) { return measure_trees({root.string()}, limits); }

std::vector<audit::event_record> disk_events(fixture& f, const std::string& org_id, const std::string& action) {
  store::audit_filter filter;
  filter.action = action;
  filter.limit = 1000;
  auto list = store::audit_store(*f.db).list_audit_events(org_id, filter);
  REQUIRE(list);
  return *list;
}

// A started sandbox whose fake container's writable layer is `layer` (and read-write volumes).
sandbox_view started_with_layer(fixture& f, const fs::path& layer, std::optional<std::int64_t> disk_mb,
                                std::vector<std::string> volumes = {}) {
  create_request req;
  req.disk_mb = disk_mb;
  auto v = f.create_started(req);
  auto* c = f.engine.of_sandbox(v.id);
  REQUIRE(c);
  fs::create_directories(layer);
  c->upper_dir = layer.string();
  c->writable_volume_dirs = std::move(volumes);
  return v;
}

}  // namespace

TEST_CASE("disk walker: counts allocated blocks, so fallocate counts in full and a sparse file by what it holds",
          "[sandbox][disk]") {
  sandfort::testing::temp_dir dir;
  allocate_file(dir.path() / "allocated", 8 << 20);
  write_file(dir.path() / "written", 1 << 20);
  {
    int fd = ::open((dir.path() / "sparse").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, off_t{1} << 30) == 0);  // 1 GiB by its size, nothing allocated
    ::close(fd);
  }
  auto u = measure_one(dir.path());
  CHECK(u.outcome == walk_outcome::complete);
  CHECK(u.entries == 3);
  CHECK(u.bytes >= 9 * disk_test_mib);
  CHECK(u.bytes < 10 * disk_test_mib);  // the sparse gigabyte is not there
}

TEST_CASE("disk walker: a hard-linked inode counts once, across roots too", "[sandbox][disk]") {
  sandfort::testing::temp_dir dir;
  fs::create_directories(dir.path() / "a");
  fs::create_directories(dir.path() / "b");
  allocate_file(dir.path() / "a" / "big", 4 << 20);
  for (int i = 0; i < 20; ++i) fs::create_hard_link(dir.path() / "a" / "big", dir.path() / "a" / ("link" + std::to_string(i)));
  fs::create_hard_link(dir.path() / "a" / "big", dir.path() / "b" / "other");
  auto u = measure_trees({(dir.path() / "a").string(), (dir.path() / "b").string()}, {});
  CHECK(u.outcome == walk_outcome::complete);
  CHECK(u.bytes >= 4 * disk_test_mib);
  CHECK(u.bytes < 5 * disk_test_mib);
  REQUIRE(u.bytes_per_root.size() == 2);
  CHECK(u.bytes_per_root[0] >= 4 * disk_test_mib);  // the first root that names it
  CHECK(u.bytes_per_root[1] < disk_test_mib);
}

TEST_CASE("disk walker: symbolic links are never followed, nor is a root that is one", "[sandbox][disk]") {
  sandfort::testing::temp_dir dir;
  const auto host = dir.path() / "host";  // a big host directory the sandbox does not own
  fs::create_directories(host / "deep");
  allocate_file(host / "deep" / "big", 32 << 20);
  const auto tree = dir.path() / "tree";
  fs::create_directories(tree / "sub");
  fs::create_directory_symlink(host, tree / "escape");
  fs::create_directory_symlink(host / "deep", tree / "sub" / "escape2");
  fs::create_symlink(host / "deep" / "big", tree / "file-link");
  fs::create_directory_symlink("/", tree / "root");
  auto u = measure_one(tree);
  CHECK(u.outcome == walk_outcome::complete);
  CHECK(u.entries == 5);
  CHECK(u.bytes < disk_test_mib);

  fs::create_directory_symlink(host, dir.path() / "link-root");
  auto through = measure_one(dir.path() / "link-root");
  CHECK(through.outcome == walk_outcome::unreadable);
  CHECK(through.bytes == 0);
  CHECK(measure_one(dir.path() / "absent").outcome == walk_outcome::unreadable);
}

TEST_CASE("disk walker: bounded in entries and depth, beyond them the tree cannot be measured", "[sandbox][disk]") {
  sandfort::testing::temp_dir dir;
  const auto wide = dir.path() / "wide";
  fs::create_directories(wide);
  for (int i = 0; i < 1500; ++i) std::ofstream(wide / std::to_string(i)) << "x";
  auto many = measure_one(wide, {1000, 64});
  CHECK(many.outcome == walk_outcome::too_many_entries);
  CHECK(many.entries == 1001);
  CHECK(measure_one(wide, {2000, 64}).outcome == walk_outcome::complete);

  const auto deep = dir.path() / "deep";
  fs::path p = deep;
  for (int i = 0; i < 40; ++i) p /= "d";
  fs::create_directories(p);
  allocate_file(p / "hidden", 2 << 20);
  auto too_deep = measure_one(deep, {1000, 16});
  CHECK(too_deep.outcome == walk_outcome::too_deep);
  auto whole = measure_one(deep, {1000, 64});
  CHECK(whole.outcome == walk_outcome::complete);
  CHECK(whole.bytes >= 2 * disk_test_mib);  // what lies 40 levels down is found
}

TEST_CASE("disk: the loop stops a sandbox over its disk_mb, says why and records it, one under it runs on",
          "[sandbox][disk]") {
  fixture f;
  sandfort::testing::temp_dir layers;
  auto over = started_with_layer(f, layers.path() / "over", 16);
  auto under = started_with_layer(f, layers.path() / "under", 64);
  allocate_file(layers.path() / "over" / "fill", 20 << 20);
  allocate_file(layers.path() / "under" / "fill", 20 << 20);

  CHECK(f.run(f.svc->disk().check()) == 1);
  auto stopped = f.get(f.org_a.id, over.id);
  REQUIRE(stopped);
  CHECK(stopped->state == "stopped");
  CHECK_THAT(stopped->error_message, Catch::Contains("disk_mb 16") && Catch::Contains("writable layer 20."));
  auto running = f.get(f.org_a.id, under.id);
  REQUIRE(running);
  CHECK(running->state == "started");
  CHECK(running->error_message.empty());

  auto exceeded = disk_events(f, f.org_a.id, "guardrail.disk_exceeded");
  REQUIRE(exceeded.size() == 1);
  CHECK(exceeded[0].target == over.id);
  CHECK(exceeded[0].actor == "system");
  auto details = nlohmann::json::parse(exceeded[0].details);
  CHECK(details["limit"] == 16);
  CHECK(details["disk_bytes"].get<std::int64_t>() >= 20 << 20);
  auto stops = disk_events(f, f.org_a.id, "sandbox.stop");
  REQUIRE(stops.size() == 1);
  CHECK(stops[0].target == over.id);

  // The metrics report the figure.
  auto m = f.run(f.svc->metrics(f.org_a.id, under.id));
  REQUIRE(m);
  REQUIRE(m->disk_bytes);
  CHECK(*m->disk_bytes >= 20 << 20);
  CHECK(f.run(f.svc->disk().check()) == 0);  // nothing more to stop
}

TEST_CASE("disk: read-write volumes count toward disk_mb", "[sandbox][disk]") {
  fixture f;
  sandfort::testing::temp_dir dirs;
  fs::create_directories(dirs.path() / "volume");
  allocate_file(dirs.path() / "volume" / "fill", 20 << 20);
  auto v = started_with_layer(f, dirs.path() / "layer", 16, {(dirs.path() / "volume").string()});
  CHECK(f.run(f.svc->disk().check()) == 1);
  auto stopped = f.get(f.org_a.id, v.id);
  REQUIRE(stopped);
  CHECK(stopped->state == "stopped");
  CHECK_THAT(stopped->error_message, Catch::Contains("read-write volumes 20."));
}

TEST_CASE("disk: a tree too large to measure counts as over the limit", "[sandbox][disk]") {
  fixture f;
  f.cfg.disk.max_walk_entries = 1000;
  sandfort::testing::temp_dir layers;
  auto v = started_with_layer(f, layers.path() / "layer", 64);
  for (int i = 0; i < 1100; ++i) std::ofstream(layers.path() / "layer" / std::to_string(i)) << "";
  CHECK(f.run(f.svc->disk().check()) == 1);
  auto stopped = f.get(f.org_a.id, v.id);
  REQUIRE(stopped);
  CHECK_THAT(stopped->error_message, Catch::Contains("more than 1000 files"));
}

TEST_CASE("disk: hard enforcement puts disk_mb into Docker's StorageOpt, and only then", "[sandbox][disk]") {
  SECTION("auto on ext4: measured, no StorageOpt") {
    fixture f;
    REQUIRE(f.run(f.svc->disk().detect_enforcement()));
    CHECK_FALSE(f.svc->disk().hard_enforcement());
    create_request req;
    req.disk_mb = 64;
    f.create_started(req);
    REQUIRE_FALSE(f.engine.created.empty());
    CHECK(f.engine.created.back().storage_size_mb == 0);
    CHECK_FALSE(docker::to_create_body(f.engine.created.back())["HostConfig"].contains("StorageOpt"));
  }
  SECTION("hard: every container carries its disk_mb, the default when the create names none") {
    fixture f;
    f.cfg.disk.enforcement = "hard";
    f.cfg.disk.default_mb = 2048;
    REQUIRE(f.run(f.svc->disk().detect_enforcement()));
    CHECK(f.svc->disk().hard_enforcement());
    create_request req;
    req.disk_mb = 64;
    f.create_started(req);
    CHECK(f.engine.created.back().storage_size_mb == 64);
    CHECK(docker::to_create_body(f.engine.created.back())["HostConfig"]["StorageOpt"] == nlohmann::json{{"size", "64M"}});
    f.create_started();
    CHECK(f.engine.created.back().storage_size_mb == 2048);
  }
  SECTION("measured: never, whatever the storage") {
    fixture f;
    f.cfg.disk.enforcement = "measured";
    f.engine.storage_answer = {"overlay2", "xfs", "/var/lib/docker"};
    REQUIRE(f.run(f.svc->disk().detect_enforcement()));
    CHECK_FALSE(f.svc->disk().hard_enforcement());
  }
}

TEST_CASE("disk: auto chooses hard only for overlay2 on XFS mounted with project quotas", "[sandbox][disk]") {
  const docker::storage_info xfs{"overlay2", "xfs", "/var/lib/docker"};
  const std::string pquota = "/dev/vdb /var/lib/docker xfs rw,relatime,attr2,inode64,prjquota 0 0\n";
  const std::string plain = "/dev/vdb /var/lib/docker xfs rw,relatime,attr2,inode64,noquota 0 0\n";
  CHECK(hard_disk_enforcement_for("auto", xfs, "/dev/vda / ext4 rw 0 0\n" + pquota));
  CHECK_FALSE(hard_disk_enforcement_for("auto", xfs, pquota + "/dev/vdc /var/lib/docker ext4 rw 0 0\n"));
  CHECK_FALSE(hard_disk_enforcement_for("auto", xfs, plain));
  CHECK_FALSE(hard_disk_enforcement_for("auto", {"overlay2", "extfs", "/var/lib/docker"}, "/dev/vda / ext4 rw 0 0\n"));
  CHECK(hard_disk_enforcement_for("hard", {"overlay2", "extfs", "/var/lib/docker"}, ""));
  CHECK_FALSE(hard_disk_enforcement_for("measured", xfs, pquota));
}

TEST_CASE("disk: disk_mb is checked, defaulted and shown", "[sandbox][disk]") {
  fixture f;
  f.cfg.disk.max_mb = 4096;
  f.cfg.disk.default_mb = 1024;
  create_request req;
  req.disk_mb = 8;
  auto small = f.create(f.org_a.id, req);
  REQUIRE_FALSE(small);
  CHECK(small.err().code == errc::invalid_argument);
  req.disk_mb = 4097;
  auto big = f.create(f.org_a.id, req);
  REQUIRE_FALSE(big);
  CHECK_THAT(big.err().message, Catch::Contains("disk_mb") && Catch::Contains("4096"));
  auto v = f.create_started();
  CHECK(v.spec.limits.disk_mb == f.cfg.disk.default_mb);
}

TEST_CASE("disk: the organization's disk quota bounds the disk_mb of its sandboxes, stopped ones included",
          "[sandbox][disk][guardrails]") {
  fixture f;
  f.cfg.guardrails.max_disk_mb = 100;
  create_request req;
  req.disk_mb = 64;
  auto first = f.create_started(req);
  auto refused = f.create(f.org_a.id, req);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::quota_exceeded);
  CHECK_THAT(refused.err().message, Catch::Contains("disk_mb — 64 of 100") && Catch::Contains("64 more asked"));
  auto recorded = disk_events(f, f.org_a.id, "guardrail.quota_exceeded");
  REQUIRE(recorded.size() == 1);
  CHECK(nlohmann::json::parse(recorded[0].details)["quota"] == "disk_mb");
  CHECK(f.create(f.org_b.id, req));  // another organization's quota is its own

  REQUIRE(f.run(f.svc->stop(f.org_a.id, first.id)));
  CHECK_FALSE(f.create(f.org_a.id, req));  // a stopped sandbox keeps its disk
  CHECK(f.run(f.svc->start(f.org_a.id, first.id)));  // and starting it again asks for no more
  req.disk_mb = 36;
  CHECK(f.create(f.org_a.id, req));  // exactly up to the quota

  // The organization's own quota overrides the default.
  limits_update u;
  u.max_disk_mb = std::optional<std::int64_t>(1000);
  auto g = f.svc->admission().set_limits(f.org_a.id, u, audit::system_actor());
  REQUIRE(g);
  CHECK(g->limits.max_disk_mb == 1000);
  CHECK(g->usage.disk_mb == 100);
  req.disk_mb = 64;
  CHECK(f.create(f.org_a.id, req));
}
