// Start-up reconciliation (Docker and the store brought into agreement) and readiness.

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;
namespace fs = std::filesystem;

namespace {

store::sandbox_record insert_row(fixture& f, int n, const std::string& state, const std::string& org_id) {
  char id[32];
  std::snprintf(id, sizeof id, "sbx-%016x", n);
  store::sandbox_record rec;
  rec.id = id;
  rec.org_id = org_id;
  rec.state = state;
  rec.snapshot = f.cfg.default_image;
  rec.spec_json = spec_to_json(sandbox_spec{});
  rec.created_at = rec.updated_at = format_time(f.clk.now());
  REQUIRE(store::sandbox_store(*f.db).insert_sandbox(rec));
  return rec;
}

std::map<std::string, std::string> our_labels(fixture& f, const std::string& sandbox_id, const std::string& org_id) {
  return {{label_sandbox, sandbox_id}, {label_org, org_id}, {label_instance, f.db->instance_id()}};
}

// A container for a row, labelled as provisioning labels it.
void add_container_for(fixture& f, const store::sandbox_record& rec, bool running, int exit_code = 0) {
  f.engine.add_container(new_container_name(), our_labels(f, rec.id, rec.org_id), running, exit_code);
}

store::sandbox_record row(fixture& f, const store::sandbox_record& rec) {
  auto r = f.row_any_state(rec.org_id, rec.id);
  REQUIRE(r);
  return *r;
}

}  // namespace

TEST_CASE("sandbox: reconcile brings rows containers and directories into agreement", "[sandbox][reconcile]") {
  fixture f(false);
  const auto& a = f.org_a.id;
  const auto& b = f.org_b.id;

  auto creating = insert_row(f, 1, "creating", a);
  add_container_for(f, creating, false);
  auto pulling = insert_row(f, 2, "pulling", a);
  auto vanished = insert_row(f, 3, "started", a);
  auto exited = insert_row(f, 4, "started", b);
  add_container_for(f, exited, false, 137);
  auto running = insert_row(f, 5, "started", a);
  add_container_for(f, running, true);
  auto stopped_gone = insert_row(f, 6, "stopped", a);
  auto already_error = insert_row(f, 7, "error", a);
  auto stopped_kept = insert_row(f, 8, "stopped", a);
  add_container_for(f, stopped_kept, false);

  // Ours without a live row: a deleted row's leftover, an unknown id, an empty one.
  auto deleted = insert_row(f, 9, "deleted", a);
  add_container_for(f, deleted, true);
  f.engine.add_container("sandfort-sbx-00000000000000ff", our_labels(f, "sbx-00000000000000ff", a), true);
  f.engine.add_container("stray", {{label_instance, f.db->instance_id()}, {label_sandbox, "sbx-0000000000000011"}},
                         false);
  // Our instance label without a sandbox: inherited from a snapshot image by someone's
  // `docker run` (sandfortd names the sandbox of every container it makes). Not ours: kept.
  auto& inherited = f.engine.add_container("someones", {{label_instance, f.db->instance_id()}}, true);
  std::string inherited_id = inherited.id;
  // Another daemon's container on the same engine, and an unlabelled one: never touched.
  auto& foreign = f.engine.add_container("sandfort-sbx-00000000000000ee",
                                         {{label_sandbox, "sbx-00000000000000ee"}, {label_instance, "other-instance"}},
                                         true);
  std::string foreign_id = foreign.id;
  auto& unrelated = f.engine.add_container("postgres", {}, true);
  std::string unrelated_id = unrelated.id;

  // Not ready until reconciliation ran, and no creates: the sweep could take a new sandbox for
  // a leftover.
  auto before = f.run(f.svc->ready());
  REQUIRE_FALSE(before.ok());
  CHECK(before.err().code == errc::unavailable);
  CHECK(before.err().message.find("reconciliation") != std::string::npos);
  auto early = f.create(f.org_a.id, create_request{});
  REQUIRE_FALSE(early.ok());
  CHECK(early.err().code == errc::unavailable);
  CHECK(early.err().message.find("reconciling") != std::string::npos);

  auto report = f.run(f.svc->reconciliation().reconcile());
  REQUIRE(report);
  CHECK(report->containers_removed == 3);
  CHECK(report->rows_marked_error == 4);  // creating, pulling, vanished, stopped_gone
  CHECK(report->rows_marked_stopped == 1);

  // Rows.
  CHECK(row(f, creating).state == "error");
  CHECK(row(f, creating).error_message.find("restarted") != std::string::npos);
  CHECK(row(f, pulling).state == "error");
  CHECK(row(f, vanished).state == "error");
  CHECK(row(f, vanished).error_message.find("vanished") != std::string::npos);
  CHECK(row(f, exited).state == "stopped");
  CHECK(row(f, running).state == "started");
  CHECK(row(f, stopped_gone).state == "error");
  CHECK(row(f, stopped_gone).error_message.find("vanished") != std::string::npos);
  CHECK(row(f, already_error).state == "error");
  CHECK(row(f, stopped_kept).state == "stopped");
  CHECK(row(f, deleted).state == "deleted");

  // Containers: the creating row's, the three without a live row gone; the rest kept.
  CHECK_FALSE(f.engine.of_sandbox(creating.id));
  CHECK_FALSE(f.engine.of_sandbox(deleted.id));
  CHECK_FALSE(f.engine.find("sandfort-sbx-00000000000000ff"));
  CHECK_FALSE(f.engine.find("stray"));
  CHECK(f.engine.of_sandbox(exited.id));
  CHECK(f.engine.of_sandbox(running.id));
  CHECK(f.engine.of_sandbox(stopped_kept.id));
  CHECK(f.engine.find(foreign_id));
  CHECK(f.engine.find(unrelated_id));
  CHECK(f.engine.find(inherited_id));
  CHECK(f.engine.containers.size() == 6);

  // Ready now, as long as Docker answers.
  CHECK(f.run(f.svc->ready()).ok());
  f.engine.version_ok = false;
  auto down = f.run(f.svc->ready());
  REQUIRE_FALSE(down.ok());
  CHECK(down.err().code == errc::unavailable);
  CHECK(down.err().message.find("docker") != std::string::npos);
  f.engine.version_ok = true;
  CHECK(f.run(f.svc->ready()).ok());

  // A second pass finds nothing left to do.
  auto second = f.run(f.svc->reconciliation().reconcile());
  REQUIRE(second);
  CHECK(second->containers_removed == 0);
  CHECK(second->rows_marked_error == 0);
  CHECK(second->rows_marked_stopped == 0);
}

TEST_CASE("sandbox: reconcile with nothing to do", "[sandbox][reconcile]") {
  fixture f(false);
  auto report = f.run(f.svc->reconciliation().reconcile());
  REQUIRE(report);
  CHECK(report->containers_removed == 0);
  CHECK(report->rows_marked_error == 0);
  CHECK(report->rows_marked_stopped == 0);
  CHECK(f.run(f.svc->ready()).ok());
}

TEST_CASE("sandbox: reconcile fails and readiness waits while Docker is unreachable", "[sandbox][reconcile]") {
  fixture f(false);
  auto r = insert_row(f, 1, "started", f.org_a.id);
  f.engine.list_error = make_error(errc::unavailable, "Docker is unreachable (fake)");
  auto report = f.run(f.svc->reconciliation().reconcile());
  REQUIRE_FALSE(report.ok());
  CHECK(report.err().code == errc::unavailable);
  // Nothing was marked on a guess.
  CHECK(row(f, r).state == "started");
  auto ready = f.run(f.svc->ready());
  REQUIRE_FALSE(ready.ok());
  CHECK(ready.err().message.find("reconciliation") != std::string::npos);

  // Docker comes back: the retry succeeds and the daemon turns ready.
  f.engine.list_error.reset();
  REQUIRE(f.run(f.svc->reconciliation().reconcile()));
  CHECK(row(f, r).state == "error");
  CHECK(f.run(f.svc->ready()).ok());
}

TEST_CASE("sandbox: ready fails when Docker does not answer even after reconciliation", "[sandbox][reconcile]") {
  fixture f(false);
  f.engine.version_ok = false;
  REQUIRE(f.run(f.svc->reconciliation().reconcile()));
  auto r = f.run(f.svc->ready());
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::unavailable);
  CHECK(r.err().message.rfind("docker: ", 0) == 0);
}

namespace {

// Before fixed_clock's time: what a daemon that died earlier left.
constexpr std::int64_t an_hour_ago = 1'767'322'800 - 3600;

store::volume_record insert_volume_row(fixture& f, const std::string& org_id, const std::string& name,
                                       const std::string& docker_name) {
  store::volume_record v;
  v.id = new_id("vol-");
  v.org_id = org_id;
  v.name = name;
  v.docker_name = docker_name;
  v.state = "ready";
  v.created_at = v.updated_at = format_time(f.clk.now());
  REQUIRE(store::resource_store(*f.db).insert_volume(v));
  return v;
}

store::snapshot_record insert_snapshot_row(fixture& f, const std::string& org_id, const std::string& name,
                                           const std::string& image_ref) {
  store::snapshot_record s;
  s.id = new_id("snap-");
  s.org_id = org_id;
  s.name = name;
  s.image_ref = image_ref;
  s.source_sandbox_id = "sbx-0000000000000001";
  s.state = "ready";
  s.created_at = s.updated_at = format_time(f.clk.now());
  REQUIRE(store::resource_store(*f.db).insert_snapshot(s));
  return s;
}

}  // namespace

TEST_CASE("sandbox: reconcile removes volumes and snapshot images that no row names", "[sandbox][reconcile]") {
  fixture f(false);
  const std::string ours = f.db->instance_id();
  auto labels = [&](const char* key, const std::string& id, const std::string& instance) {
    return std::map<std::string, std::string>{{label_instance, instance}, {key, id}};
  };

  // Rows of two organizations with their Docker objects: kept.
  auto kept_a = insert_volume_row(f, f.org_a.id, "cache", "sandfort-vol-00000000000000a1");
  f.engine.add_volume(kept_a.docker_name, labels("io.sandfort.volume", kept_a.id, ours), an_hour_ago);
  auto kept_b = insert_volume_row(f, f.org_b.id, "cache", "sandfort-vol-00000000000000b1");
  f.engine.add_volume(kept_b.docker_name, labels("io.sandfort.volume", kept_b.id, ours), an_hour_ago);
  auto snap_a = insert_snapshot_row(f, f.org_a.id, "base", "sandfort-snap/00000000000000a1:latest");
  std::string snap_a_image =
      f.engine.add_image(snap_a.image_ref, labels("io.sandfort.snapshot", snap_a.id, ours), an_hour_ago).id;
  auto snap_b = insert_snapshot_row(f, f.org_b.id, "base", "sandfort-snap/00000000000000b1:latest");
  f.engine.add_image(snap_b.image_ref, labels("io.sandfort.snapshot", snap_b.id, ours), an_hour_ago);

  // Ours without a row (a crash between Docker's create and the insert), or with a deleted one.
  f.engine.add_volume("sandfort-vol-00000000000000f1", labels("io.sandfort.volume", "vol-00000000000000f1", ours),
                      an_hour_ago);
  auto deleted = insert_volume_row(f, f.org_a.id, "old", "sandfort-vol-00000000000000d1");
  REQUIRE(store::resource_store(*f.db).set_volume_state(f.org_a.id, deleted.id, "deleting", {"ready"},
                                                        format_time(f.clk.now())));
  REQUIRE(store::resource_store(*f.db).set_volume_state(f.org_a.id, deleted.id, "deleted", {"deleting"},
                                                        format_time(f.clk.now())));
  f.engine.add_volume(deleted.docker_name, labels("io.sandfort.volume", deleted.id, ours), an_hour_ago);
  std::string orphan_image = f.engine
                                 .add_image("sandfort-snap/00000000000000f1:latest",
                                            labels("io.sandfort.snapshot", "snap-00000000000000f1", ours), an_hour_ago)
                                 .id;
  // Ours without a row, but a container still uses the image: never forced, left.
  std::string used_image = f.engine
                               .add_image("sandfort-snap/00000000000000f2:latest",
                                          labels("io.sandfort.snapshot", "snap-00000000000000f2", ours), an_hour_ago)
                               .id;
  docker::container_spec user;
  user.name = "someone-elses";
  user.image = "sandfort-snap/00000000000000f2:latest";
  f.engine.created.push_back(user);
  f.engine.add_container(user.name, {}, true);
  // Ours without a row, but made while this pass runs: a create in flight, its row still to come.
  f.engine.add_volume("sandfort-vol-00000000000000f3", labels("io.sandfort.volume", "vol-00000000000000f3", ours),
                      f.engine.now_unix);
  std::string fresh_image = f.engine
                                .add_image("sandfort-snap/00000000000000f3:latest",
                                           labels("io.sandfort.snapshot", "snap-00000000000000f3", ours),
                                           f.engine.now_unix)
                                .id;

  // Another daemon's on the same engine, and ones without our labels: never touched.
  f.engine.add_volume("sandfort-vol-00000000000000e1", labels("io.sandfort.volume", "vol-00000000000000e1", "other"),
                      an_hour_ago);
  f.engine.add_volume("postgres-data", {}, an_hour_ago);
  std::string foreign_image = f.engine
                                  .add_image("sandfort-snap/00000000000000e1:latest",
                                             labels("io.sandfort.snapshot", "snap-00000000000000e1", "other"),
                                             an_hour_ago)
                                  .id;
  std::string unrelated_image = f.engine.add_image("debian:bookworm", {}, an_hour_ago).id;
  std::string instance_only = f.engine.add_image("sandfort/base:mine", {{label_instance, ours}}, an_hour_ago).id;

  // Rows whose Docker object is gone: logged and counted, left as they are (no error state).
  auto lost_volume = insert_volume_row(f, f.org_b.id, "lost", "sandfort-vol-00000000000000c1");
  auto lost_snapshot = insert_snapshot_row(f, f.org_b.id, "lost", "sandfort-snap/00000000000000c1:latest");

  auto report = f.run(f.svc->reconciliation().reconcile());
  REQUIRE(report);
  CHECK(report->volumes_removed == 2);
  CHECK(report->images_removed == 1);
  CHECK(report->orphans_kept == 1);
  CHECK(report->volume_rows_missing == 1);
  CHECK(report->snapshot_rows_missing == 1);

  // Only this daemon's volumes and snapshot images were asked for.
  REQUIRE_FALSE(f.engine.volume_lists.empty());
  CHECK(f.engine.volume_lists.back() ==
        std::vector<std::string>{std::string(label_instance) + "=" + ours, "io.sandfort.volume"});
  REQUIRE_FALSE(f.engine.image_lists.empty());
  CHECK(f.engine.image_lists.back() ==
        std::vector<std::string>{std::string(label_instance) + "=" + ours, "io.sandfort.snapshot"});

  CHECK(f.engine.volumes.count(kept_a.docker_name));
  CHECK(f.engine.volumes.count(kept_b.docker_name));
  CHECK_FALSE(f.engine.volumes.count("sandfort-vol-00000000000000f1"));
  CHECK_FALSE(f.engine.volumes.count(deleted.docker_name));
  CHECK(f.engine.volumes.count("sandfort-vol-00000000000000f3"));
  CHECK(f.engine.volumes.count("sandfort-vol-00000000000000e1"));
  CHECK(f.engine.volumes.count("postgres-data"));
  CHECK(f.engine.volumes.size() == 5);

  CHECK(f.engine.image_details.count(snap_a_image));
  CHECK(f.engine.images.count(snap_a.image_ref));
  CHECK(f.engine.images.count(snap_b.image_ref));
  CHECK_FALSE(f.engine.image_details.count(orphan_image));
  CHECK_FALSE(f.engine.images.count("sandfort-snap/00000000000000f1:latest"));
  CHECK(f.engine.images_removed == std::vector<std::string>{orphan_image});  // by id
  CHECK(f.engine.image_details.count(used_image));
  CHECK(f.engine.image_details.count(fresh_image));
  CHECK(f.engine.image_details.count(foreign_image));
  CHECK(f.engine.image_details.count(unrelated_image));
  CHECK(f.engine.image_details.count(instance_only));

  // The rows stay as they were: the volume and snapshot rows whose objects are gone included.
  CHECK(store::resource_store(*f.db).get_volume(f.org_a.id, kept_a.id));
  CHECK(store::resource_store(*f.db).get_volume(f.org_b.id, lost_volume.id)->state == "ready");
  CHECK(store::resource_store(*f.db).get_snapshot(f.org_b.id, lost_snapshot.id)->state == "ready");

  // The next pass: what was left for a create in flight is now older than the pass; the used
  // image is still used.
  f.clk.t += std::chrono::hours(1);
  auto second = f.run(f.svc->reconciliation().reconcile());
  REQUIRE(second);
  CHECK(second->volumes_removed == 1);
  CHECK(second->images_removed == 1);
  CHECK(second->orphans_kept == 1);
  CHECK_FALSE(f.engine.volumes.count("sandfort-vol-00000000000000f3"));
  CHECK_FALSE(f.engine.image_details.count(fresh_image));
  CHECK(f.engine.image_details.count(used_image));
}

TEST_CASE("sandbox: volumes and snapshots made through the service survive reconciliation", "[sandbox][reconcile]") {
  fixture f;
  volume_create_request vreq;
  vreq.name = "cache";
  auto v = f.run(f.svc->volumes().create(f.org_a.id, vreq, audit::system_actor()));
  REQUIRE(v);
  auto box = f.create_started();
  snapshot_create_request sreq;
  sreq.name = "base";
  sreq.sandbox_id = box.id;
  auto s = f.run(f.svc->snapshots().create(f.org_a.id, sreq, audit::system_actor()));
  REQUIRE(s);
  f.clk.t += std::chrono::hours(1);  // a restart later: nothing is new any more

  auto report = f.run(f.svc->reconciliation().reconcile());
  REQUIRE(report);
  CHECK(report->volumes_removed == 0);
  CHECK(report->images_removed == 0);
  CHECK(report->orphans_kept == 0);
  CHECK(report->volume_rows_missing == 0);
  CHECK(report->snapshot_rows_missing == 0);
  CHECK(f.engine.volumes.size() == 1);
  CHECK(f.engine.images.count(f.engine.commits.at(0)));
}

TEST_CASE("sandbox: a reconcile that failed while Docker was unreachable removes orphans on its retry", "[sandbox][reconcile]") {
  fixture f(false);
  f.engine.add_volume("sandfort-vol-00000000000000f1",
                      {{label_instance, f.db->instance_id()}, {"io.sandfort.volume", "vol-00000000000000f1"}},
                      an_hour_ago);
  f.engine.list_error = make_error(errc::unavailable, "Docker is unreachable (fake)");
  REQUIRE_FALSE(f.run(f.svc->reconciliation().reconcile()));
  CHECK(f.engine.volumes.size() == 1);
  f.engine.list_error.reset();
  auto report = f.run(f.svc->reconciliation().reconcile());
  REQUIRE(report);
  CHECK(report->volumes_removed == 1);
  CHECK(f.engine.volumes.empty());
}
