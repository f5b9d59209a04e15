// The sandbox lifecycle over the fakes: create (with pulls and failures), waiting for states,
// organization scoping, stop/start and delete (the reaper: guardrails_test.cpp).

#include <catch2/catch.hpp>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;
namespace fs = std::filesystem;

namespace {

struct timed_view {
  result<sandbox_view> created = make_error(errc::internal, "not run");
  result<sandbox_view> got = make_error(errc::internal, "not run");
  std::chrono::steady_clock::duration waited{};
};

// Creates without waiting, then blocks in get(wait_for) as a second caller would.
asio::awaitable<timed_view> create_then_wait(service& svc, std::string org_id, create_request req,
                                             std::string wait_for, std::chrono::milliseconds timeout) {
  timed_view out;
  out.created = co_await svc.create(org_id, req);
  if (!out.created) co_return out;
  std::string id = out.created->id;
  auto t0 = std::chrono::steady_clock::now();
  out.got = co_await svc.get(org_id, id, wait_for, timeout);
  out.waited = std::chrono::steady_clock::now() - t0;
  co_return out;
}

// Creates without waiting and deletes at once, while provisioning is still talking to Docker.
asio::awaitable<result<sandbox_view>> create_then_remove(service& svc, std::string org_id, create_request req) {
  auto created = co_await svc.create(org_id, req);
  if (!created) co_return created;
  std::string id = created->id;
  auto removed = co_await svc.remove(org_id, id);
  if (!removed) co_return std::move(removed).err();
  co_return created;
}

asio::awaitable<result<void>> remove_after(service& svc, std::string org_id, std::string id,
                                           std::chrono::milliseconds delay) {
  co_await sleep_for(delay);
  auto r = co_await svc.remove(org_id, id);
  co_return r;
}

}  // namespace

TEST_CASE("sandbox: create with wait returns a started sandbox with its run directory", "[sandbox][lifecycle]") {
  fixture f;
  create_request req;
  req.name = "first";
  auto v = f.create_started(req);
  CHECK(is_id(v.id, "sbx-"));
  CHECK(v.state == "started");
  CHECK(v.name == "first");
  CHECK(v.snapshot == "sandfort/base:bookworm");
  CHECK(v.created_at == format_time(f.clk.now()));
  CHECK(v.error_message.empty());
  CHECK_FALSE(v.expires_at);
  CHECK(f.engine.pulls.empty());  // the image was there
  auto* c = f.engine.of_sandbox(v.id);
  REQUIRE(c);
  CHECK(c->running);
  CHECK(f.engine.started == std::vector<std::string>{c->id});
  CHECK(f.agent.health_calls >= 1);
  // Docker's embedded DNS tells neighbours every container's name: it must not be the id.
  CHECK(c->name.find(v.id) == std::string::npos);
  CHECK(c->name.rfind("sandfort-", 0) == 0);

  auto row = store::sandbox_store(*f.db).get_sandbox(f.org_a.id, v.id);
  REQUIRE(row);
  CHECK(row->state == "started");
  CHECK(row->container_id == c->id);

  // Addressable by name too.
  auto by_name = f.get(f.org_a.id, "first");
  REQUIRE(by_name);
  CHECK(by_name->id == v.id);
}

TEST_CASE("sandbox: another user than root gets /work from the engine before the first start", "[sandbox][lifecycle]") {
  fixture f;
  create_request as_root;
  f.create_started(as_root);
  as_root.user = "0:0";
  f.create_started(as_root);
  create_request with_workdir;
  with_workdir.user = "nobody";
  with_workdir.workdir = "/srv/app";  // the caller's to prepare
  f.create_started(with_workdir);
  CHECK(f.engine.archives_put.empty());

  create_request as_nobody;
  as_nobody.user = "nobody";
  auto v = f.create_started(as_nobody);
  auto* c = f.engine.of_sandbox(v.id);
  REQUIRE(c);
  REQUIRE(f.engine.archives_put.size() == 1);
  const auto& put = f.engine.archives_put[0];
  CHECK(put.container == c->id);
  CHECK(put.path == "/");
  CHECK(put.as_container_user);
  // One directory entry, "work/", type '5', mode 0755, then the two empty blocks.
  REQUIRE(put.archive.size() == 3 * 512);
  CHECK(std::string(put.archive.c_str()) == "work/");
  CHECK(put.archive[156] == '5');
  CHECK(put.archive.substr(100, 7) == "0000755");
  CHECK(put.archive.find_first_not_of('\0', 512) == std::string::npos);
}

TEST_CASE("sandbox: create without wait answers creating and provisions in the background", "[sandbox][lifecycle]") {
  fixture f;
  create_request req;
  auto v = f.create(f.org_a.id, req);  // runs the background provisioning to the end as well
  REQUIRE(v);
  CHECK(v->state == "creating");
  auto now = f.get(f.org_a.id, v->id);
  REQUIRE(now);
  CHECK(now->state == "started");
}

TEST_CASE("sandbox: create pulls a missing image and passes through pulling", "[sandbox][lifecycle]") {
  fixture f;
  f.engine.images.clear();
  std::vector<std::string> states_during_pull;
  f.engine.on_pull = [&](const std::string&) {
    auto rows = store::sandbox_store(*f.db).list_live_sandboxes_all_orgs();
    REQUIRE(rows);
    for (const auto& r : *rows) states_during_pull.push_back(r.state);
  };
  auto v = f.create_started();
  CHECK(f.engine.pulls == std::vector<std::string>{"sandfort/base:bookworm"});
  CHECK(states_during_pull == std::vector<std::string>{"pulling"});
  CHECK(v.state == "started");
  CHECK(f.engine.created.size() == 1);
}

TEST_CASE("sandbox: create with wait and a failing pull returns the error and leaves nothing", "[sandbox][lifecycle]") {
  fixture f;
  f.engine.images.clear();
  f.engine.pull_error = make_error(errc::not_found, "pull access denied for nope/nope");
  create_request req;
  req.snapshot = "nope/nope";
  req.wait = true;
  auto v = f.create(f.org_a.id, req);
  REQUIRE_FALSE(v.ok());
  CHECK(v.err().code == errc::not_found);
  CHECK(v.err().message.find("pull access denied") != std::string::npos);
  CHECK(f.engine.pulls == std::vector<std::string>{"nope/nope"});
  CHECK(f.engine.created.empty());

  auto rows = store::sandbox_store(*f.db).list_live_sandboxes_all_orgs();
  REQUIRE(rows);
  CHECK(rows->empty());
  store::sandbox_filter deleted;
  deleted.state = "deleted";
  auto gone = store::sandbox_store(*f.db).list_sandboxes(f.org_a.id, deleted);
  REQUIRE(gone);
  REQUIRE(gone->size() == 1);
  CHECK(f.get(f.org_a.id, gone->front().id).err().code == errc::not_found);
}

TEST_CASE("sandbox: create without wait and a failing pull leaves the row in error", "[sandbox][lifecycle]") {
  fixture f;
  f.engine.images.clear();
  f.engine.pull_error = make_error(errc::internal, "manifest unknown for ghost:1");
  create_request req;
  req.snapshot = "ghost:1";
  auto v = f.create(f.org_a.id, req);
  REQUIRE(v);
  CHECK(v->state == "creating");
  auto now = f.get(f.org_a.id, v->id);
  REQUIRE(now);
  CHECK(now->state == "error");
  CHECK(now->error_message.find("manifest unknown for ghost:1") != std::string::npos);
  CHECK(f.engine.created.empty());
}

TEST_CASE("sandbox: create cleans up when the engine cannot create the container", "[sandbox][lifecycle]") {
  fixture f;
  f.engine.create_error = make_error(errc::unavailable, "Docker is unreachable (fake)");
  create_request req;
  auto v = f.create(f.org_a.id, req);
  REQUIRE(v);
  auto now = f.get(f.org_a.id, v->id);
  REQUIRE(now);
  CHECK(now->state == "error");
  CHECK(now->error_message.find("unreachable") != std::string::npos);
}

TEST_CASE("sandbox: create reports a container that exits before its agent answers", "[sandbox][lifecycle]") {
  fixture f;
  f.agent.healthy = false;
  f.engine.exit_on_start = 3;
  SECTION("with wait the caller gets the exit code and no row remains") {
    create_request req;
    req.wait = true;
    auto v = f.create(f.org_a.id, req);
    REQUIRE_FALSE(v.ok());
    CHECK(v.err().message.find("exited with code 3") != std::string::npos);
    CHECK(v.err().message.find("out of memory") == std::string::npos);
    auto rows = store::sandbox_store(*f.db).list_live_sandboxes_all_orgs();
    REQUIRE(rows);
    CHECK(rows->empty());
  }
  SECTION("without wait the row is in error with the exit code") {
    f.engine.exit_on_start = 137;
    f.engine.oom_on_start = true;
    create_request req;
    auto v = f.create(f.org_a.id, req);
    REQUIRE(v);
    auto now = f.get(f.org_a.id, v->id);
    REQUIRE(now);
    CHECK(now->state == "error");
    CHECK(now->error_message.find("exited with code 137") != std::string::npos);
    CHECK(now->error_message.find("out of memory") != std::string::npos);
  }
  // Either way the container was removed.
  CHECK(f.engine.containers.empty());
  CHECK(f.engine.removed.size() == 1);
}

TEST_CASE("sandbox: create gives up on an agent that never answers in a running container", "[sandbox][lifecycle]") {
  fixture f;
  f.agent.healthy = false;
  f.cfg.agent_start_timeout_s = 1;
  create_request req;
  req.wait = true;
  auto t0 = std::chrono::steady_clock::now();
  auto v = f.create(f.org_a.id, req);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  REQUIRE_FALSE(v.ok());
  CHECK(v.err().code == errc::unavailable);
  CHECK(v.err().message.find("did not answer within 1 s") != std::string::npos);
  CHECK(f.engine.containers.empty());
}

TEST_CASE("sandbox: get with wait_for returns when another coroutine finishes provisioning", "[sandbox][wait]") {
  fixture f;
  f.engine.start_delay = 150ms;  // the start completes on a timer, not by being polled
  create_request req;
  auto out = f.run(create_then_wait(*f.svc, f.org_a.id, req, "started", 10s));
  REQUIRE(out.created);
  CHECK(out.created->state == "creating");
  REQUIRE(out.got);
  CHECK(out.got->state == "started");
  CHECK(out.waited >= 140ms);
  CHECK(out.waited < 3s);  // woken by the state change, far before the timeout
}

TEST_CASE("sandbox: get with wait_for returns the current state at the timeout", "[sandbox][wait]") {
  fixture f;
  f.engine.start_delay = 600ms;
  create_request req;
  auto out = f.run(create_then_wait(*f.svc, f.org_a.id, req, "started", 100ms));
  REQUIRE(out.got);
  CHECK(out.got->state == "creating");
  CHECK(out.waited >= 90ms);
  CHECK(out.waited < 550ms);
  // Provisioning carried on and finished.
  auto later = f.get(f.org_a.id, out.created->id);
  REQUIRE(later);
  CHECK(later->state == "started");
}

TEST_CASE("sandbox: get with wait_for started also returns on error", "[sandbox][wait]") {
  fixture f;
  f.engine.images.clear();
  f.engine.pull_error = make_error(errc::internal, "registry down");
  create_request req;
  auto out = f.run(create_then_wait(*f.svc, f.org_a.id, req, "started", 10s));
  REQUIRE(out.got);
  CHECK(out.got->state == "error");
  CHECK(out.waited < 3s);
}

TEST_CASE("sandbox: get rejects an unknown wait_for state", "[sandbox][wait]") {
  fixture f;
  auto v = f.create_started();
  std::string wait_for = "deleted";
  auto r = f.run(f.svc->get(f.org_a.id, v.id, wait_for, 1000ms));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::invalid_argument);
  CHECK(r.err().message.find("wait_for") != std::string::npos);
}

TEST_CASE("sandbox: another organization cannot see or touch a sandbox", "[sandbox][scoping]") {
  fixture f;
  auto v = f.create_started();
  const auto& b = f.org_b.id;
  CHECK(f.get(b, v.id).err().code == errc::not_found);
  CHECK(f.run(f.svc->stop(b, v.id)).err().code == errc::not_found);
  CHECK(f.run(f.svc->start(b, v.id)).err().code == errc::not_found);
  CHECK(f.run(f.svc->remove(b, v.id)).err().code == errc::not_found);
  exec_request er;
  er.argv = {"true"};
  CHECK(f.run(f.svc->commands().exec(b, v.id, er)).err().code == errc::not_found);
  code_run_request cr;
  cr.language = "sh";
  cr.code = "true";
  CHECK(f.run(f.svc->commands().code_run(b, v.id, cr)).err().code == errc::not_found);
  list_request lr;
  auto page = f.run(f.svc->list(b, lr));
  REQUIRE(page);
  CHECK(page->items.empty());

  // Nothing happened to it.
  CHECK(f.agent.execs.empty());
  CHECK(f.engine.stopped.empty());
  CHECK(f.engine.removed.empty());
  auto still = f.get(f.org_a.id, v.id);
  REQUIRE(still);
  CHECK(still->state == "started");
}

TEST_CASE("sandbox: stop and start follow the state rules", "[sandbox][lifecycle]") {
  fixture f;
  auto v = f.create_started();
  auto name = f.engine.of_sandbox(v.id)->id;

  auto stopped = f.run(f.svc->stop(f.org_a.id, v.id));
  REQUIRE(stopped);
  CHECK(stopped->state == "stopped");
  CHECK(f.engine.stopped == std::vector<std::pair<std::string, int>>{{name, 7}});  // cfg.stop_timeout_s
  CHECK_FALSE(f.engine.find(name)->running);

  // Stopping again is a no-op.
  auto again = f.run(f.svc->stop(f.org_a.id, v.id));
  REQUIRE(again);
  CHECK(again->state == "stopped");
  CHECK(f.engine.stopped.size() == 1);

  auto started = f.run(f.svc->start(f.org_a.id, v.id));
  REQUIRE(started);
  CHECK(started->state == "started");
  CHECK(f.engine.find(name)->running);
  CHECK(f.engine.started.size() == 2);

  // Starting a started sandbox is a no-op.
  auto again2 = f.run(f.svc->start(f.org_a.id, v.id));
  REQUIRE(again2);
  CHECK(f.engine.started.size() == 2);
}

TEST_CASE("sandbox: stop and start refuse a sandbox in error with conflict", "[sandbox][lifecycle]") {
  fixture f;
  f.engine.images.clear();
  f.engine.pull_error = make_error(errc::internal, "no such image");
  create_request req;
  auto v = f.create(f.org_a.id, req);
  REQUIRE(v);
  REQUIRE(f.get(f.org_a.id, v->id)->state == "error");
  auto s = f.run(f.svc->stop(f.org_a.id, v->id));
  REQUIRE_FALSE(s.ok());
  CHECK(s.err().code == errc::conflict);
  auto t = f.run(f.svc->start(f.org_a.id, v->id));
  REQUIRE_FALSE(t.ok());
  CHECK(t.err().code == errc::conflict);
}

TEST_CASE("sandbox: start marks the sandbox error when its agent does not come back", "[sandbox][lifecycle]") {
  fixture f;
  auto v = f.create_started();
  REQUIRE(f.run(f.svc->stop(f.org_a.id, v.id)));
  f.agent.healthy = false;
  f.engine.exit_on_start = 1;
  auto r = f.run(f.svc->start(f.org_a.id, v.id));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().message.find("exited with code 1") != std::string::npos);
  auto now = f.get(f.org_a.id, v.id);
  REQUIRE(now);
  CHECK(now->state == "error");
}

TEST_CASE("sandbox: remove keeps the row when the engine is unavailable", "[sandbox][remove]") {
  fixture f;
  auto v = f.create_started();
  f.engine.remove_error = make_error(errc::unavailable, "Docker is unreachable (fake)");
  auto r = f.run(f.svc->remove(f.org_a.id, v.id));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::unavailable);
  auto still = f.get(f.org_a.id, v.id);
  REQUIRE(still);
  CHECK(still->state == "started");
  CHECK(f.engine.of_sandbox(v.id));
}

TEST_CASE("sandbox: remove deletes the container and the row", "[sandbox][remove]") {
  fixture f;
  create_request req;
  req.name = "reusable";
  auto v = f.create_started(req);
  auto container_id = f.engine.of_sandbox(v.id)->id;
  f.agent.forgotten.clear();
  auto r = f.run(f.svc->remove(f.org_a.id, v.id));
  REQUIRE(r.ok());
  CHECK(f.get(f.org_a.id, v.id).err().code == errc::not_found);
  CHECK(f.engine.containers.empty());
  CHECK(f.engine.removed == std::vector<std::string>{container_id});
  CHECK(f.agent.forgotten == std::vector<std::string>{v.id});
  auto row = f.row_any_state(f.org_a.id, v.id);
  REQUIRE(row);
  CHECK(row->state == "deleted");

  // Removing it again: not found. Its name is free again.
  CHECK(f.run(f.svc->remove(f.org_a.id, v.id)).err().code == errc::not_found);
  auto w = f.create_started(req);
  CHECK(w.id != v.id);
}

TEST_CASE("sandbox: remove succeeds when the container is already gone", "[sandbox][remove]") {
  fixture f;
  auto v = f.create_started();
  f.engine.containers.clear();
  auto r = f.run(f.svc->remove(f.org_a.id, v.id));
  REQUIRE(r.ok());
  CHECK(f.get(f.org_a.id, v.id).err().code == errc::not_found);
}

// A coroutine that awaited Docker and then writes its stale copy of the row must not bring a
// deleted sandbox back (update_sandbox never touches a deleted row).
TEST_CASE("sandbox: remove during provisioning does not bring the sandbox back", "[sandbox][remove]") {
  fixture f;
  f.engine.images.clear();            // take the pull path ...
  f.engine.image_check_delay = 50ms;  // ... after a Docker round trip that the delete overtakes
  create_request req;
  auto v = f.run(create_then_remove(*f.svc, f.org_a.id, req));
  REQUIRE(v);
  auto now = f.get(f.org_a.id, v->id);
  INFO("after the delete the sandbox is " << (now ? now->state : std::string("gone")));
  CHECK_FALSE(now.ok());
  CHECK(f.engine.containers.empty());
}

TEST_CASE("sandbox: remove during start does not bring the sandbox back", "[sandbox][remove]") {
  fixture f;
  auto v = f.create_started();
  REQUIRE(f.run(f.svc->stop(f.org_a.id, v.id)));
  f.agent.healthy = false;  // start() waits for the agent ...
  std::optional<result<void>> removed;
  asio::co_spawn(f.ioc, remove_after(*f.svc, f.org_a.id, v.id, 20ms),  // ... while the caller deletes it
                 [&](std::exception_ptr, result<void> r) { removed = std::move(r); });
  auto started = f.run(f.svc->start(f.org_a.id, v.id));
  CHECK_FALSE(started.ok());
  REQUIRE(removed);
  CHECK(removed->ok());
  auto now = f.get(f.org_a.id, v.id);
  INFO("after the delete the sandbox is " << (now ? now->state : std::string("gone")));
  CHECK_FALSE(now.ok());
}

namespace {

// Rows straight into the store with chosen ids, so page boundaries are deterministic.
std::string insert_row(fixture& f, int n, std::map<std::string, std::string> labels, const std::string& state = "started") {
  char id[32];
  std::snprintf(id, sizeof id, "sbx-%016x", n);
  sandbox_spec spec;
  spec.labels = std::move(labels);
  store::sandbox_record rec;
  rec.id = id;
  rec.org_id = f.org_a.id;
  rec.state = state;
  rec.snapshot = f.cfg.default_image;
  rec.spec_json = spec_to_json(spec);
  rec.created_at = rec.updated_at = format_time(f.clk.now());
  REQUIRE(store::sandbox_store(*f.db).insert_sandbox(rec));
  return rec.id;
}

std::vector<std::string> list_all(fixture& f, list_request lr) {
  std::vector<std::string> seen;
  for (int pages = 0; pages < 50; ++pages) {
    auto page = f.run(f.svc->list(f.org_a.id, lr));
    REQUIRE(page);
    CHECK(page->items.size() <= lr.limit);
    for (const auto& item : page->items) seen.push_back(item.id);
    if (page->next_cursor.empty()) break;
    lr.cursor = page->next_cursor;
  }
  return seen;
}

}  // namespace

TEST_CASE("sandbox: list pages through every sandbox in id order", "[sandbox][list]") {
  fixture f;
  std::vector<std::string> all;
  for (int n = 1; n <= 7; ++n) all.push_back(insert_row(f, n, {}));
  insert_row(f, 8, {}, "deleted");
  for (std::size_t limit : {1u, 2u, 3u, 7u, 100u}) {
    INFO("limit " << limit);
    list_request lr;
    lr.limit = limit;
    CHECK(list_all(f, lr) == all);
  }
  list_request stopped_only;
  stopped_only.state = "stopped";
  CHECK(list_all(f, stopped_only).empty());
}

TEST_CASE("sandbox: list pages through sandboxes with a label filter without losing any", "[sandbox][list]") {
  fixture f;
  // Rows 3 and 6 do not match. With limit 4 the first batch (1-4) gives three items and the
  // short last batch (5 6 7) fills the page at row 5: row 7 must still come on a next page.
  std::vector<std::string> matching;
  for (int n = 1; n <= 7; ++n) {
    bool match = n % 3 != 0;
    auto id = insert_row(f, n, match ? std::map<std::string, std::string>{{"team", "a"}}
                                     : std::map<std::string, std::string>{{"team", "b"}});
    if (match) matching.push_back(id);
  }
  for (std::size_t limit : {1u, 2u, 3u, 4u, 5u, 100u}) {
    INFO("limit " << limit);
    list_request lr;
    lr.limit = limit;
    lr.labels = {{"team", "a"}};
    CHECK(list_all(f, lr) == matching);
  }
}
