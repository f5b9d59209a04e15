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
  REQUIRE(f.db->insert_sandbox(rec));
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

  // Ours without a live row: a deleted row's leftover, an unknown id, no sandbox label at all.
  auto deleted = insert_row(f, 9, "deleted", a);
  add_container_for(f, deleted, true);
  f.engine.add_container("sandfort-sbx-00000000000000ff", our_labels(f, "sbx-00000000000000ff", a), true);
  f.engine.add_container("stray", {{label_instance, f.db->instance_id()}}, false);
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

  auto report = f.run(f.svc->reconcile());
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
  CHECK(f.engine.containers.size() == 5);

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
  auto second = f.run(f.svc->reconcile());
  REQUIRE(second);
  CHECK(second->containers_removed == 0);
  CHECK(second->rows_marked_error == 0);
  CHECK(second->rows_marked_stopped == 0);
}

TEST_CASE("sandbox: reconcile with nothing to do", "[sandbox][reconcile]") {
  fixture f(false);
  auto report = f.run(f.svc->reconcile());
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
  auto report = f.run(f.svc->reconcile());
  REQUIRE_FALSE(report.ok());
  CHECK(report.err().code == errc::unavailable);
  // Nothing was marked on a guess.
  CHECK(row(f, r).state == "started");
  auto ready = f.run(f.svc->ready());
  REQUIRE_FALSE(ready.ok());
  CHECK(ready.err().message.find("reconciliation") != std::string::npos);

  // Docker comes back: the retry succeeds and the daemon turns ready.
  f.engine.list_error.reset();
  REQUIRE(f.run(f.svc->reconcile()));
  CHECK(row(f, r).state == "error");
  CHECK(f.run(f.svc->ready()).ok());
}

TEST_CASE("sandbox: ready fails when Docker does not answer even after reconciliation", "[sandbox][reconcile]") {
  fixture f(false);
  f.engine.version_ok = false;
  REQUIRE(f.run(f.svc->reconcile()));
  auto r = f.run(f.svc->ready());
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::unavailable);
  CHECK(r.err().message.rfind("docker: ", 0) == 0);
}
