// Guardrails over the fakes: quotas, image policy, the kill switch, and the reaper (TTL and idle
// stops, deletion after the grace period), each decision in the audit chain.

#include <boost/asio/detached.hpp>
#include <catch2/catch.hpp>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

std::vector<audit::event_record> events(fixture& f, const std::string& org_id, const std::string& action) {
  store::audit_filter filter;
  filter.action = action;
  filter.limit = 1000;
  auto list = store::audit_store(*f.db).list_audit_events(org_id, filter);
  REQUIRE(list);
  return *list;
}

// The fake engine, with Docker's volume creates and commits taking a while: parallel creates
// are all between their quota check and their insert at once.
class slow_engine final : public docker::engine {
 public:
  explicit slow_engine(fake_engine& inner) : e(inner) {}
  fake_engine& e;
  std::chrono::milliseconds delay{20};
  int volume_creates = 0, commits = 0;  // as asked, before the delay

  docker::task<docker::version_info> version() override { return e.version(); }
  docker::task<std::string> api_version() override { return e.api_version(); }
  docker::task<docker::storage_info> storage() override { return e.storage(); }
  docker::task<std::vector<std::string>> runtimes() override { return e.runtimes(); }
  docker::task<bool> image_exists(const std::string& ref) override { return e.image_exists(ref); }
  docker::task<docker::image_details> inspect_image(const std::string& ref) override { return e.inspect_image(ref); }
  docker::task<void> load_image(std::string archive) override { return e.load_image(std::move(archive)); }
  docker::task<void> pull_image(const std::string& ref) override { return e.pull_image(ref); }
  docker::task<void> put_archive(const std::string& id, const std::string& path, std::string archive,
                                 bool as_user) override {
    return e.put_archive(id, path, std::move(archive), as_user);
  }
  docker::task<std::string> create_container(const docker::container_spec& spec) override {
    return e.create_container(spec);
  }
  docker::task<void> start_container(const std::string& id) override { return e.start_container(id); }
  docker::task<void> stop_container(const std::string& id, int t) override { return e.stop_container(id, t); }
  docker::task<void> pause_container(const std::string& id) override { return e.pause_container(id); }
  docker::task<void> unpause_container(const std::string& id) override { return e.unpause_container(id); }
  docker::task<void> remove_container(const std::string& id) override { return e.remove_container(id); }
  docker::task<docker::container_info> inspect_container(const std::string& id) override {
    return e.inspect_container(id);
  }
  docker::task<std::vector<docker::container_info>> list_containers(const std::vector<std::string>& l) override {
    return e.list_containers(l);
  }
  docker::task<docker::container_stats> stats(const std::string& id) override { return e.stats(id); }
  docker::task<docker::network_info> inspect_network(const std::string& name) override {
    return e.inspect_network(name);
  }
  docker::task<docker::network_info> create_network(const docker::network_spec& spec) override {
    return e.create_network(spec);
  }
  docker::task<docker::volume_info> create_volume(const docker::volume_spec& spec) override {
    ++volume_creates;
    co_await sleep_for(delay);
    co_return co_await e.create_volume(spec);
  }
  docker::task<void> remove_volume(const std::string& name) override { return e.remove_volume(name); }
  docker::task<std::vector<docker::volume_info>> list_volumes(const std::vector<std::string>& l) override {
    return e.list_volumes(l);
  }
  docker::task<std::string> commit_container(const std::string& id, const std::string& repo, const std::string& tag,
                                             const std::map<std::string, std::string>& labels,
                                             const std::vector<std::string>& env) override {
    ++commits;
    co_await sleep_for(delay);
    co_return co_await e.commit_container(id, repo, tag, labels, env);
  }
  docker::task<std::int64_t> image_size(const std::string& ref) override { return e.image_size(ref); }
  docker::task<void> remove_image(const std::string& ref) override { return e.remove_image(ref); }
  docker::task<std::vector<docker::image_info>> list_images(const std::vector<std::string>& l) override {
    return e.list_images(l);
  }
  docker::task<void> follow_events(docker::event_subscription sub, docker::event_handler on_event,
                                   std::function<void()> on_open) override {
    return e.follow_events(std::move(sub), std::move(on_event), std::move(on_open));
  }
};

// Runs `n` calls of `make(i)` at once on the fixture's io_context, until all are done. `make`
// lives (in the caller) until then.
template <typename T, typename Make>
std::vector<result<T>> in_parallel(fixture& f, int n, Make make) {
  std::vector<std::optional<result<T>>> got(n);
  for (int i = 0; i < n; ++i)
    asio::co_spawn(
        f.ioc, [&got, &make, i]() -> asio::awaitable<void> { got[i].emplace(co_await make(i)); }, asio::detached);
  f.ioc.restart();
  f.ioc.run_for(10s);
  std::vector<result<T>> out;
  for (auto& g : got) {
    REQUIRE(g);
    out.push_back(std::move(*g));
  }
  return out;
}

}  // namespace

TEST_CASE("guardrails: an organization over its sandbox quota gets quota_exceeded naming the use", "[sandbox][guardrails]") {
  fixture f;
  f.cfg.guardrails.max_sandboxes = 2;
  f.create_started();
  auto second = f.create_started();
  auto refused = f.run(f.svc->create(f.org_a.id, {}));
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::quota_exceeded);
  CHECK_THAT(refused.err().message, Catch::Contains("sandboxes") && Catch::Contains("2 of 2"));
  CHECK(f.run(f.svc->create(f.org_b.id, {})));  // another organization is not affected
  auto recorded = events(f, f.org_a.id, "guardrail.quota_exceeded");
  REQUIRE(recorded.size() == 1);
  CHECK(recorded[0].outcome == "denied");

  // Stopped sandboxes count; deleted ones do not.
  REQUIRE(f.run(f.svc->stop(f.org_a.id, second.id)));
  CHECK_FALSE(f.run(f.svc->create(f.org_a.id, {})));
  REQUIRE(f.run(f.svc->remove(f.org_a.id, second.id)));
  CHECK(f.run(f.svc->create(f.org_a.id, {})));
}

TEST_CASE("guardrails: CPU and memory quotas count running sandboxes, also when one is started again", "[sandbox][guardrails]") {
  fixture f;  // default resources: 1.5 CPUs, 768 MB
  f.cfg.guardrails.max_cpus = 3;
  f.cfg.guardrails.max_memory_mb = 100000;
  auto a = f.create_started();
  f.create_started();
  auto refused = f.run(f.svc->create(f.org_a.id, {}));
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.err().message, Catch::Contains("cpus") && Catch::Contains("3 of 3"));
  REQUIRE(f.run(f.svc->stop(f.org_a.id, a.id)));
  auto c = f.create_started();  // a's CPUs are free while it is stopped ...
  auto restart = f.run(f.svc->start(f.org_a.id, a.id));  // ... so it cannot start again now
  REQUIRE_FALSE(restart);
  CHECK(restart.err().code == errc::quota_exceeded);

  f.cfg.guardrails.max_cpus = 100;
  f.cfg.guardrails.max_memory_mb = 1000;  // 768 in use: 768 more do not fit
  REQUIRE(f.run(f.svc->remove(f.org_a.id, c.id)));
  auto memory = f.run(f.svc->start(f.org_a.id, a.id));
  REQUIRE_FALSE(memory);
  CHECK_THAT(memory.err().message, Catch::Contains("memory_mb") && Catch::Contains("768 of 1000"));
}

TEST_CASE("guardrails: an organization's own limits override the defaults, null goes back", "[sandbox][guardrails]") {
  fixture f;
  f.cfg.guardrails.max_sandboxes = 1;
  limits_update u;
  u.max_sandboxes = std::optional<std::int64_t>(3);
  u.allowed_images = std::optional<std::vector<std::string>>(std::vector<std::string>{"sandfort/*", "python:3.12-*"});
  auto set = f.svc->admission().set_limits(f.org_a.id, u, audit::system_actor());
  REQUIRE(set);
  CHECK(set->limits.max_sandboxes == 3);
  CHECK(set->own_fields == std::vector<std::string>{"max_sandboxes", "allowed_images"});
  f.create_started();
  f.create_started();
  CHECK(f.svc->admission().guardrails(f.org_a.id)->usage.sandboxes == 2);
  CHECK(f.svc->admission().guardrails(f.org_b.id)->limits.max_sandboxes == 1);  // others keep the default
  REQUIRE(events(f, f.org_a.id, "org.limits").size() == 1);

  limits_update back;
  back.max_sandboxes = std::optional<std::int64_t>();
  auto reset = f.svc->admission().set_limits(f.org_a.id, back, audit::system_actor());
  REQUIRE(reset);
  CHECK(reset->limits.max_sandboxes == 1);
  CHECK(reset->limits.allowed_images.size() == 2);  // unchanged: not in the update

  limits_update bad;
  bad.allowed_images = std::optional<std::vector<std::string>>(std::vector<std::string>{"has space"});
  CHECK(f.svc->admission().set_limits(f.org_a.id, bad, audit::system_actor()).err().code == errc::invalid_argument);
}

TEST_CASE("guardrails: images outside the organization's patterns are refused with image_not_allowed", "[sandbox][guardrails]") {
  fixture f;
  limits_update u;
  u.allowed_images = std::optional<std::vector<std::string>>(std::vector<std::string>{"sandfort/*", "python:3.12*"});
  REQUIRE(f.svc->admission().set_limits(f.org_a.id, u, audit::system_actor()));
  create_request python;
  python.snapshot = "python:3.12-slim";
  CHECK(f.run(f.svc->create(f.org_a.id, python)));
  CHECK(f.run(f.svc->create(f.org_a.id, {})));  // the default image, sandfort/base:bookworm
  for (const char* image : {"python:3.11", "docker.io/library/python:3.12", "evil/sandfort/x", "node:20"}) {
    create_request other;
    other.snapshot = image;
    auto refused = f.run(f.svc->create(f.org_a.id, other));
    INFO(image);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().code == errc::image_not_allowed);
  }
  CHECK(events(f, f.org_a.id, "guardrail.image_not_allowed").size() == 4);
  create_request node;
  node.snapshot = "node:20";
  CHECK(f.run(f.svc->create(f.org_b.id, node)));  // the default policy: any image
}

namespace {

limits_update runtimes(std::optional<std::vector<std::string>> allowed) {
  limits_update u;
  u.allowed_runtimes = std::move(allowed);
  return u;
}

std::size_t rows_not_deleted(fixture& f, const std::string& org_id) {
  auto rows = store::sandbox_store(*f.db).list_live_sandboxes(org_id);
  REQUIRE(rows);
  return rows->size();
}

}  // namespace

TEST_CASE("guardrails: an organization required to run gVisor gets it by default, runc is refused, nothing made",
          "[sandbox][guardrails][runtimes]") {
  fixture f;  // default_runtime runc, gvisor_runtime runsc
  auto set = f.svc->admission().set_limits(f.org_a.id, runtimes(std::vector<std::string>{"gvisor"}),
                                           audit::system_actor());
  REQUIRE(set);
  CHECK(set->limits.allowed_runtimes == std::vector<std::string>{"gvisor"});
  CHECK(set->own_fields == std::vector<std::string>{"allowed_runtimes"});
  auto limits_events = events(f, f.org_a.id, "org.limits");
  REQUIRE(limits_events.size() == 1);
  CHECK(nlohmann::json::parse(limits_events[0].details)["allowed_runtimes"] == nlohmann::json::array({"gvisor"}));

  // Named runc: refused before anything exists, and recorded.
  const auto containers = f.engine.created.size();
  create_request runc;
  runc.runtime = "runc";
  runc.wait = true;
  auto refused = f.create(f.org_a.id, runc);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::runtime_not_allowed);
  CHECK(http_status(refused.err().code) == 403);
  CHECK_THAT(refused.err().message, Catch::Contains("runtime runc is not allowed") && Catch::Contains("[\"gvisor\"]"));
  CHECK(f.engine.created.size() == containers);
  CHECK(rows_not_deleted(f, f.org_a.id) == 0);
  auto denied = events(f, f.org_a.id, "guardrail.runtime_not_allowed");
  REQUIRE(denied.size() == 1);
  CHECK(denied[0].outcome == "denied");
  CHECK(nlohmann::json::parse(denied[0].details)["runtime"] == "runc");
  CHECK(nlohmann::json::parse(denied[0].details)["allowed"] == nlohmann::json::array({"gvisor"}));

  // Named none: gVisor, the organization's policy, though the daemon's default is runc.
  auto made = f.create_started();
  CHECK(made.spec.runtime == "gvisor");
  CHECK(f.engine.created.back().runtime == "runsc");
  create_request gvisor;
  gvisor.runtime = "gvisor";
  gvisor.wait = true;
  CHECK(f.create(f.org_a.id, gvisor));

  // Its own snapshot skips the image policy, not the runtime policy.
  REQUIRE(make_snapshot(f, f.org_a.id, made.id, "base"));
  create_request from = runc;
  from.snapshot = "base";
  CHECK(f.create(f.org_a.id, from).err().code == errc::runtime_not_allowed);
  from.runtime.clear();
  auto from_snapshot = f.create(f.org_a.id, from);
  REQUIRE(from_snapshot);
  CHECK(from_snapshot->spec.runtime == "gvisor");

  // Another organization keeps the configured default.
  auto other = f.create(f.org_b.id, {});
  REQUIRE(other);
  CHECK(other->spec.runtime == "runc");

  // null: back to the default, which allows both and names runc.
  auto reset = f.svc->admission().set_limits(f.org_a.id, runtimes(std::nullopt), audit::system_actor());
  REQUIRE(reset);
  CHECK(reset->limits.allowed_runtimes == std::vector<std::string>{"runc", "gvisor"});
  CHECK(reset->own_fields.empty());
  auto again = f.create(f.org_a.id, runc);
  REQUIRE(again);
  CHECK(again->spec.runtime == "runc");
  CHECK(f.create(f.org_a.id, {})->spec.runtime == "runc");
}

TEST_CASE("guardrails: a stopped runc sandbox is not started again once the organization must run gVisor",
          "[sandbox][guardrails][runtimes]") {
  fixture f;
  auto box = f.create_started();
  REQUIRE(f.run(f.svc->stop(f.org_a.id, box.id)));
  REQUIRE(f.svc->admission().set_limits(f.org_a.id, runtimes(std::vector<std::string>{"gvisor"}),
                                        audit::system_actor()));
  auto refused = f.run(f.svc->start(f.org_a.id, box.id));
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::runtime_not_allowed);
  CHECK_THAT(refused.err().message, Catch::Contains(box.id) && Catch::Contains("no longer allows"));
  CHECK(f.get(f.org_a.id, box.id)->state == "stopped");
  auto denied = events(f, f.org_a.id, "guardrail.runtime_not_allowed");
  REQUIRE(denied.size() == 1);
  CHECK(denied[0].target == box.id);

  REQUIRE(f.svc->admission().set_limits(f.org_a.id, runtimes(std::vector<std::string>{"runc", "gvisor"}),
                                        audit::system_actor()));
  CHECK(f.run(f.svc->start(f.org_a.id, box.id)));
}

TEST_CASE("guardrails: a runtime policy names known runtimes, at least one, each once, that the daemon offers",
          "[sandbox][guardrails][runtimes]") {
  fixture f;
  using list = std::vector<std::string>;
  for (const auto& [bad, why] : {std::pair{list{}, "at least one runtime"}, std::pair{list{"kata"}, "'kata' is not"},
                                 std::pair{list{"runc", "Runc"}, "'Runc' is not"},
                                 std::pair{list{"gvisor", "gvisor"}, "gvisor is named twice"}}) {
    auto r = f.svc->admission().set_limits(f.org_a.id, runtimes(bad), audit::system_actor());
    INFO(why);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::invalid_argument);
    CHECK_THAT(r.err().message, Catch::Contains(why));
  }
  CHECK(events(f, f.org_a.id, "org.limits").empty());  // nothing changed
  CHECK(f.svc->admission().guardrails(f.org_a.id)->own_fields.empty());

  // gVisor alone on a daemon that offers none would refuse every create; runc beside it would not.
  f.cfg.gvisor_runtime.clear();
  auto alone = f.svc->admission().set_limits(f.org_a.id, runtimes(list{"gvisor"}), audit::system_actor());
  REQUIRE_FALSE(alone);
  CHECK_THAT(alone.err().message, Catch::Contains("gvisor_runtime is empty"));
  CHECK(f.svc->admission().set_limits(f.org_a.id, runtimes(list{"gvisor", "runc"}), audit::system_actor()));
}

TEST_CASE("guardrails: the default runtime is the configured one where allowed, else the first allowed",
          "[sandbox][guardrails][runtimes]") {
  org_limits l;
  l.allowed_runtimes = {"runc", "gvisor"};
  CHECK(default_runtime_of(l, "runc") == "runc");
  CHECK(default_runtime_of(l, "gvisor") == "gvisor");
  l.allowed_runtimes = {"runc"};
  CHECK(default_runtime_of(l, "gvisor") == "runc");
  l.allowed_runtimes = {"gvisor"};
  CHECK(default_runtime_of(l, "runc") == "gvisor");

  // The configured policy of every organization, and one organization's own over it.
  fixture f;
  f.cfg.guardrails.allowed_runtimes = {"gvisor"};
  CHECK(f.create(f.org_b.id, {})->spec.runtime == "gvisor");
  create_request runc;
  runc.runtime = "runc";
  CHECK(f.create(f.org_b.id, runc).err().code == errc::runtime_not_allowed);
  REQUIRE(f.svc->admission().set_limits(f.org_a.id, runtimes(std::vector<std::string>{"runc"}), audit::system_actor()));
  CHECK(f.create(f.org_a.id, {})->spec.runtime == "runc");
  create_request gvisor;
  gvisor.runtime = "gvisor";
  CHECK(f.create(f.org_a.id, gvisor).err().code == errc::runtime_not_allowed);
}

TEST_CASE("guardrails: the kill switch stops every running sandbox and refuses new ones until lifted", "[sandbox][guardrails]") {
  fixture f;
  auto a = f.create_started();
  auto b = f.create_started();
  auto other = f.run(f.svc->create(f.org_b.id, {}));
  auto report = f.run(f.svc->admission().stop_all(f.org_a.id, true, audit::system_actor()));
  REQUIRE(report);
  CHECK(report->stopped.size() == 2);
  CHECK(f.get(f.org_a.id, a.id)->state == "stopped");
  CHECK(f.get(f.org_a.id, b.id)->state == "stopped");
  CHECK(f.get(f.org_b.id, other->id)->state == "started");

  CHECK(f.run(f.svc->create(f.org_a.id, {})).err().code == errc::conflict);
  CHECK(f.run(f.svc->start(f.org_a.id, a.id)).err().code == errc::conflict);
  CHECK(f.run(f.svc->create(f.org_b.id, {})));
  // Set by the operator: the organization's admin cannot lift it.
  CHECK(f.svc->admission().lift_stop(f.org_a.id, false, audit::system_actor()).err().code == errc::permission_denied);
  REQUIRE(f.svc->admission().lift_stop(f.org_a.id, true, audit::system_actor()));
  CHECK(f.run(f.svc->start(f.org_a.id, a.id)));
  CHECK(events(f, f.org_a.id, "org.stop_all").size() == 1);
  CHECK(events(f, f.org_a.id, "org.stop_all_lifted").size() == 1);
  CHECK(events(f, f.org_a.id, "guardrail.org_stopped").size() == 2);
}

TEST_CASE("guardrails: TTL stops, then deletes after the grace period", "[sandbox][guardrails][reaper]") {
  fixture f;
  f.cfg.guardrails.delete_grace_s = 600;
  create_request short_ttl;
  short_ttl.ttl_s = 60;
  auto a = f.create_started(short_ttl);
  create_request long_ttl;
  long_ttl.ttl_s = 3600;
  auto b = f.create_started(long_ttl);
  CHECK(f.run(f.svc->admission().reap()) == 0);

  f.clk.t += std::chrono::seconds(61);
  CHECK(f.run(f.svc->admission().reap()) == 1);
  auto stopped = f.get(f.org_a.id, a.id);
  REQUIRE(stopped);
  CHECK(stopped->state == "stopped");
  CHECK_THAT(stopped->error_message, Catch::Contains("TTL reached"));
  CHECK(f.get(f.org_a.id, b.id)->state == "started");

  f.clk.t += std::chrono::seconds(600);
  CHECK(f.run(f.svc->admission().reap()) >= 1);
  CHECK(f.get(f.org_a.id, a.id).err().code == errc::not_found);
  CHECK_FALSE(f.engine.of_sandbox(a.id));
  CHECK(f.engine.of_sandbox(b.id));
}

TEST_CASE("guardrails: an idle sandbox is stopped, used ones are not, started again it is kept", "[sandbox][guardrails][reaper]") {
  fixture f;
  f.cfg.guardrails.delete_grace_s = 100;
  create_request idle;
  idle.idle_timeout_s = 30;
  auto a = f.create_started(idle);
  auto b = f.create_started(idle);
  create_request never;
  never.idle_timeout_s = 0;
  auto c = f.create_started(never);
  CHECK(f.run(f.svc->admission().reap()) == 0);  // first look: counts from now

  f.clk.t += std::chrono::seconds(20);
  f.svc->activity().touch(b.id);  // b is used
  {
    auto busy = f.svc->activity().busy(c.id);  // held: never idle while held
  }
  f.clk.t += std::chrono::seconds(15);
  CHECK(f.run(f.svc->admission().reap()) == 1);
  CHECK(f.get(f.org_a.id, a.id)->state == "stopped");
  CHECK_THAT(f.get(f.org_a.id, a.id)->error_message, Catch::Contains("idle for 35 s"));
  CHECK(f.get(f.org_a.id, b.id)->state == "started");
  CHECK(f.get(f.org_a.id, c.id)->state == "started");
  auto stop_events = events(f, f.org_a.id, "sandbox.stop");
  REQUIRE(stop_events.size() == 1);
  CHECK(stop_events[0].actor == "system");
  CHECK_THAT(stop_events[0].details, Catch::Contains("delete_after"));

  // b goes idle too, is stopped, and is started again within the grace: kept.
  f.clk.t += std::chrono::seconds(30);
  CHECK(f.run(f.svc->admission().reap()) == 1);
  REQUIRE(f.get(f.org_a.id, b.id)->state == "stopped");
  REQUIRE(f.run(f.svc->start(f.org_a.id, b.id)));
  f.clk.t += std::chrono::seconds(101);  // a's grace is over; b was started again
  f.run(f.svc->admission().reap());
  CHECK(f.get(f.org_a.id, a.id).err().code == errc::not_found);
  CHECK(f.get(f.org_a.id, b.id));
  CHECK(f.get(f.org_a.id, c.id)->state == "started");
}

TEST_CASE("guardrails: volumes over the organization's quota are refused before Docker is asked", "[sandbox][guardrails][volumes]") {
  fixture f;
  CHECK(f.svc->admission().guardrails(f.org_a.id)->limits.max_volumes == 20);  // the default
  f.cfg.guardrails.max_volumes = 2;
  REQUIRE(make_volume(f, f.org_a.id, "one"));
  REQUIRE(make_volume(f, f.org_a.id, "two"));
  auto refused = make_volume(f, f.org_a.id, "three");
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::quota_exceeded);
  // The same words as the sandbox quota: the quota, its limit and the use.
  CHECK(refused.err().message == "quota exceeded: volumes — 2 of 2 in use (delete some)");
  CHECK(f.engine.volumes.size() == 2);  // Docker was not asked
  CHECK(f.svc->volumes().get(f.org_a.id, "three").err().code == errc::not_found);
  auto recorded = events(f, f.org_a.id, "guardrail.quota_exceeded");
  REQUIRE(recorded.size() == 1);
  CHECK(recorded[0].outcome == "denied");
  auto details = nlohmann::json::parse(recorded[0].details);
  CHECK(details["quota"] == "volumes");
  CHECK(details["limit"] == 2);
  CHECK(details["in_use"] == 2);
  CHECK(make_volume(f, f.org_b.id, "three"));  // another organization is not affected

  auto view = f.svc->admission().guardrails(f.org_a.id);
  REQUIRE(view);
  CHECK(view->usage.volumes == 2);
  CHECK(view->limits.max_volumes == 2);
  // A delete makes room; a refused create left nothing behind, not even its name.
  REQUIRE(f.run(f.svc->volumes().remove(f.org_a.id, "one", audit::system_actor())));
  REQUIRE(make_volume(f, f.org_a.id, "three"));
  CHECK(f.svc->admission().guardrails(f.org_a.id)->usage.volumes == 2);

  // A create that fails in Docker gives its place back.
  f.cfg.guardrails.max_volumes = 3;
  f.engine.volume_create_error = make_error(errc::unavailable, "Docker is unreachable (fake)");
  CHECK(make_volume(f, f.org_a.id, "four").err().code == errc::unavailable);
  f.engine.volume_create_error.reset();
  REQUIRE(make_volume(f, f.org_a.id, "four"));
  CHECK(make_volume(f, f.org_a.id, "five").err().code == errc::quota_exceeded);
}

TEST_CASE("guardrails: snapshots over the organization's quota are refused before the commit", "[sandbox][guardrails][snapshots]") {
  fixture f;
  CHECK(f.svc->admission().guardrails(f.org_a.id)->limits.max_snapshots == 20);  // the default
  f.cfg.guardrails.max_snapshots = 1;
  auto box = f.create_started();
  REQUIRE(make_snapshot(f, f.org_a.id, box.id, "first"));
  auto refused = make_snapshot(f, f.org_a.id, box.id, "second");
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::quota_exceeded);
  CHECK(refused.err().message == "quota exceeded: snapshots — 1 of 1 in use (delete some)");
  CHECK(f.engine.commits.size() == 1);  // Docker was not asked
  auto recorded = events(f, f.org_a.id, "guardrail.quota_exceeded");
  REQUIRE(recorded.size() == 1);
  CHECK(recorded[0].outcome == "denied");
  auto details = nlohmann::json::parse(recorded[0].details);
  CHECK(details["quota"] == "snapshots");
  CHECK(details["limit"] == 1);
  CHECK(details["in_use"] == 1);
  CHECK(f.svc->admission().guardrails(f.org_a.id)->usage.snapshots == 1);

  REQUIRE(f.run(f.svc->snapshots().remove(f.org_a.id, "first", audit::system_actor())));
  CHECK(f.svc->admission().guardrails(f.org_a.id)->usage.snapshots == 0);
  REQUIRE(make_snapshot(f, f.org_a.id, box.id, "second"));
}

TEST_CASE("guardrails: an organization's own volume and snapshot quotas override the defaults, null goes back",
          "[sandbox][guardrails]") {
  fixture f;
  limits_update u;
  u.max_volumes = std::optional<std::int64_t>(1);
  u.max_snapshots = std::optional<std::int64_t>(0);
  auto set = f.svc->admission().set_limits(f.org_a.id, u, audit::system_actor());
  REQUIRE(set);
  CHECK(set->limits.max_volumes == 1);
  CHECK(set->limits.max_snapshots == 0);
  CHECK(set->limits.max_sandboxes == 100);  // not in the update
  CHECK(set->own_fields == std::vector<std::string>{"max_volumes", "max_snapshots"});
  auto change = events(f, f.org_a.id, "org.limits");
  REQUIRE(change.size() == 1);
  CHECK(nlohmann::json::parse(change[0].details)["max_volumes"] == 1);

  REQUIRE(make_volume(f, f.org_a.id, "one"));
  CHECK_THAT(make_volume(f, f.org_a.id, "two").err().message, Catch::Contains("1 of 1"));
  REQUIRE(make_volume(f, f.org_b.id, "one"));
  REQUIRE(make_volume(f, f.org_b.id, "two"));  // others keep the default
  auto box = f.create_started();
  CHECK_THAT(make_snapshot(f, f.org_a.id, box.id, "s").err().message, Catch::Contains("0 of 0"));

  limits_update back;
  back.max_volumes = std::optional<std::int64_t>();
  auto reset = f.svc->admission().set_limits(f.org_a.id, back, audit::system_actor());
  REQUIRE(reset);
  CHECK(reset->limits.max_volumes == 20);
  CHECK(reset->limits.max_snapshots == 0);  // unchanged: not in the update
  CHECK(reset->own_fields == std::vector<std::string>{"max_snapshots"});
  REQUIRE(make_volume(f, f.org_a.id, "two"));

  for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{1'000'001}}) {
    limits_update wrong;
    wrong.max_snapshots = std::optional<std::int64_t>(bad);
    auto r = f.svc->admission().set_limits(f.org_a.id, wrong, audit::system_actor());
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::invalid_argument);
    CHECK_THAT(r.err().message, Catch::Contains("max_snapshots"));
  }
}

TEST_CASE("guardrails: parallel volume and snapshot creates cannot overshoot the quota while Docker works",
          "[sandbox][guardrails][volumes][snapshots]") {
  fixture f;
  f.cfg.guardrails.max_volumes = 2;
  f.cfg.guardrails.max_snapshots = 1;
  auto box = f.create_started();
  slow_engine slow(f.engine);
  volume_service volumes(*f.db, slow, f.clk, f.cfg.guardrails);
  snapshot_service snapshots(*f.db, slow, f.clk, f.cfg.guardrails, f.svc->reconciliation());

  // Each call keeps its request in its own frame: create() holds it by reference.
  auto made = in_parallel<volume_view>(f, 5, [&](int i) -> asio::awaitable<result<volume_view>> {
    volume_create_request req;
    req.name = "v" + std::to_string(i);
    co_return co_await volumes.create(f.org_a.id, req, audit::system_actor());
  });
  int ok = 0, refused = 0;
  for (const auto& r : made) {
    if (r) ++ok;
    else if (r.err().code == errc::quota_exceeded) ++refused;
  }
  CHECK(ok == 2);
  CHECK(refused == 3);
  CHECK(slow.volume_creates == 2);  // the refused ones never reached Docker
  CHECK(*store::resource_store(*f.db).count_live_volumes(f.org_a.id) == 2);

  auto snapped = in_parallel<snapshot_view>(f, 3, [&](int i) -> asio::awaitable<result<snapshot_view>> {
    snapshot_create_request req;
    req.sandbox_id = box.id;
    req.name = "s" + std::to_string(i);
    co_return co_await snapshots.create(f.org_a.id, req, audit::system_actor());
  });
  ok = refused = 0;
  for (const auto& r : snapped) {
    if (r) ++ok;
    else if (r.err().code == errc::quota_exceeded) ++refused;
  }
  CHECK(ok == 1);
  CHECK(refused == 2);
  CHECK(slow.commits == 1);
  CHECK(*store::resource_store(*f.db).count_live_snapshots(f.org_a.id) == 1);

  // Every create is done: none still holds a place. A delete makes room for exactly one more.
  auto first = store::resource_store(*f.db).list_volumes(f.org_a.id, "", 10);
  REQUIRE(first);
  REQUIRE(f.run(volumes.remove(f.org_a.id, first->front().name, audit::system_actor())));
  auto again = in_parallel<volume_view>(f, 2, [&](int i) -> asio::awaitable<result<volume_view>> {
    volume_create_request req;
    req.name = "w" + std::to_string(i);
    co_return co_await volumes.create(f.org_a.id, req, audit::system_actor());
  });
  CHECK(static_cast<int>(again[0].ok()) + static_cast<int>(again[1].ok()) == 1);
}
