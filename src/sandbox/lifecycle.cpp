// Sandbox lifecycle: create (with image pull), wait for states, stop, start, delete, TTL; PATCH
// of what may change while it runs, and its resource metrics.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "sandfort/crypto/digest.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/docker/image_archive.hpp"
#include "sandfort/sandbox/gvisor_preload.hpp"
#include "sandfort/sandbox/service.hpp"
#include "sandfort/store/secret_store.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::sandbox {

namespace asio = boost::asio;

service::service(asio::any_io_executor executor, const config& cfg, store::database& db, docker::engine& engine,
                 agent_connector& agent, const clock& clk, audit::group_writer& events, host_memory* host)
    : executor_(std::move(executor)), cfg_(cfg), db_(db), sandboxes_(db), guardrails_(db), resources_(db),
      engine_(engine), agent_(agent), clock_(clk),
      own_host_(host ? nullptr : std::make_unique<proc_meminfo>()), host_(host ? *host : *own_host_),
      journal_(db, clk),
      activity_(clk),
      net_(cfg, db, engine, agent, activity_),
      transitions_(executor_, cfg, db, engine, agent, net_, clk),
      disk_(cfg, db, engine, clk, *this),
      admission_(executor_, cfg, db, clk, activity_, host_, pool_, *this),
      pool_(executor_, cfg, db, engine, agent, net_, transitions_, admission_),
      reconciler_(executor_, cfg, db, engine, clk, net_, activity_, pool_, transitions_),
      volumes_(db, engine, clk, cfg.guardrails),
      snapshots_(db, engine, clk, cfg.guardrails, reconciler_),
      commands_(cfg, db, agent, activity_, events, transitions_) {}

nlohmann::json service::spec_for_audit(const std::string& spec_json) {
  auto spec = nlohmann::json::parse(spec_json, nullptr, false);
  if (!spec.is_object()) return nlohmann::json::object();
  if (auto env = spec.find("env"); env != spec.end() && env->is_object()) {
    auto names = nlohmann::json::array();
    for (auto it = env->begin(); it != env->end(); ++it) names.push_back(it.key());
    *env = names;
  }
  return audit::floats_as_text(std::move(spec));
}

task<void> service::gvisor_offered() {
  if (gvisor_seen_) co_return ok_t{};
  auto names = co_await engine_.runtimes();
  if (!names) co_return std::move(names).err();
  if (std::find(names->begin(), names->end(), cfg_.gvisor_runtime) == names->end())
    co_return make_error(errc::unavailable, "gVisor sandboxes are not offered here: the Docker Engine has no runtime '" +
                                                cfg_.gvisor_runtime + "' (scripts/setup registers it; docs/gvisor.md)");
  gvisor_seen_ = true;
  co_return ok_t{};
}

task<sandbox_view> service::create(const std::string& org_id, const create_request& req, const audit::actor& who) {
  // The organization's own snapshot first (src/sandbox/snapshots.cpp); else an image reference.
  auto snapshot = snapshots_.resolve(org_id, req.snapshot);
  if (!snapshot) co_return std::move(snapshot).err();
  create_request checked = req;
  if (*snapshot) checked.snapshot.clear();  // a snapshot name is no image reference to check
  // No runtime named: the organization's default, which its runtime policy may make gVisor
  // (admission.hpp). A runtime named is checked against the policy by admit() below.
  if (checked.runtime.empty()) {
    auto runtime = admission_.default_runtime(org_id);
    if (!runtime) co_return std::move(runtime).err();
    checked.runtime = std::move(*runtime);
  }
  // No egress fields: the organization's egress defaults, when it has them (docs/egress.md).
  if (!checked.egress_given) {
    auto defaults = admission_.egress_defaults(org_id);
    if (!defaults) co_return std::move(defaults).err();
    if (*defaults) {
      checked.egress_allowlist = (*defaults)->allow;
      checked.egress_deny = (*defaults)->deny;
      checked.egress_rules = (*defaults)->rules;
    }
  }
  auto spec = validate_create(cfg_, checked);
  if (!spec) co_return std::move(spec).err();
  // Each secret is the organization's own (another's name is not found, as an unknown one is),
  // and the CA the sandbox will trust exists before any row does.
  for (const auto& a : spec->secrets)
    if (auto found = store::secret_store(db_).get(org_id, a.name); !found)
      co_return found.err().code == errc::not_found ? make_error(errc::not_found, "secret " + a.name + " not found")
                                                    : std::move(found).err();
  if (spec->trusts_interception_ca) {
    if (!interception_ca_) co_return make_error(errc::unavailable, "secrets are not offered by this daemon");
    if (auto ca = interception_ca_(org_id); !ca) co_return std::move(ca).err();
  }
  if (*snapshot) spec->snapshot_name = req.snapshot;
  if (!net_.ready()) co_return make_error(errc::unavailable, "the sandbox network is not ready yet (is Docker running?)");
  // Reconciliation removes containers and marks rows it cannot account for: a sandbox created
  // while it sweeps could be taken for a leftover.
  if (!reconciler_.reconciled()) co_return make_error(errc::unavailable, "sandfortd is still reconciling with Docker; retry shortly");
  if (spec->runtime == "gvisor")
    if (auto offered = co_await gvisor_offered(); !offered) co_return std::move(offered).err();
  std::string image = req.snapshot.empty() ? cfg_.default_image : req.snapshot;
  if (*snapshot) image = (*snapshot)->image_ref;
  // The one door (image_resolution.cpp): an image here now must be the one named, and no
  // snapshot image of anyone's under another name; refused before a row exists. Provisioning
  // resolves again (the image may be pulled, or retagged, meanwhile) and creates by id.
  const std::string own_snapshot_id = *snapshot ? (*snapshot)->id : std::string();
  if (auto resolved = co_await resolve_image(engine_, db_.instance_id(), image, own_snapshot_id); !resolved)
    co_return std::move(resolved).err();
  if (*snapshot) {
    // Still this snapshot, and still ready, after the co_await (a delete checks for rows using it).
    auto again = snapshots_.resolve(org_id, req.snapshot);
    if (!again) co_return std::move(again).err();
    if (!*again || (*again)->id != (*snapshot)->id)
      co_return make_error(errc::not_found, "snapshot " + req.snapshot + " not found");
  }
  // Looked up here and linked in the insert below, with no co_await between: a volume being
  // deleted is not found, and one found cannot be deleted before the link exists.
  auto volumes = volumes_.resolve(org_id, *spec);
  if (!volumes) co_return std::move(volumes).err();
  // Checked and inserted without a co_await between: no other create can slip in and overrun.
  // The organization's own snapshots skip the image policy: each was made from an image it was
  // allowed to use (admit's `restarting` does the same for a stopped sandbox).
  if (auto admitted = admission_.admit(org_id, *spec, image, {}, who, *snapshot ? true : false); !admitted)
    co_return std::move(admitted).err();
  // A started sandbox from the warm pool when one was made for exactly this (docs/pool.md):
  // volumes and a user are fixed when a container is made, so those creates are made cold.
  std::optional<pool_member> member;
  // Members are made with the default disk_mb (under hard enforcement, Docker's size of them),
  // and as runc containers on the sandbox network: a gVisor create, or one that dials home, is
  // never handed one (nor is an organization that may not run runc: admit() refused its runc
  // create above).
  if (spec->volumes.empty() && spec->user.empty() && spec->limits.disk_mb == cfg_.disk.default_mb &&
      spec->runtime == "runc" && !spec->dials_home && !spec->trusts_interception_ca)
    member = pool_.take(image, {spec->limits.cpus, spec->limits.memory_mb, spec->limits.pids});
  // A member's memory was the host's already: taken, it moves from the pool to this sandbox.
  if (auto room = admission_.admit_to_host(org_id, spec->limits.memory_mb, {}, who, !member); !room) {
    if (member) co_await pool_.destroy(*member);
    co_return std::move(room).err();
  }
  spec->pooled = member.has_value();
  store::sandbox_record rec;
  rec.id = member ? member->sandbox_id : new_id("sbx-");
  if (member) {
    rec.container_id = member->container_id;
    rec.address = member->address;
  }
  rec.org_id = org_id;
  rec.name = req.name;
  rec.state = "creating";
  rec.snapshot = image;
  rec.spec_json = spec_to_json(*spec);
  auto now = clock_.now();
  rec.created_at = rec.updated_at = format_time(now);
  if (spec->ttl_s) rec.expires_at = format_time(now + std::chrono::seconds(*spec->ttl_s));
  // The proxy credential's secret goes into the container's environment and nowhere else.
  std::string proxy_secret = random_hex(24);
  rec.proxy_secret_sha256 = sha256_hex(proxy_secret);
  rec.preview_key = random_hex(32);
  // The row exists before any container does, so a crash at any later point leaves
  // something reconciliation can find by its labels.
  auto inserted = journal_.record_change(
      {org_id}, who,
      [&]() -> result<void> {
        if (auto r = sandboxes_.insert_sandbox(rec); !r) return r;
        for (std::size_t i = 0; i < volumes->size(); ++i)
          if (auto r = resources_.insert_sandbox_volume(
                  rec.id, (*volumes)[i].id, spec->volumes[i].mount_path, spec->volumes[i].read_only);
              !r)
            return r;
        return {};
      },
      [&] {
        return audit::record{"sandbox.create", rec.id, "ok",
                             {{"name", rec.name}, {"snapshot", rec.snapshot}, {"spec", spec_for_audit(rec.spec_json)}}};
      });
  if (!inserted) {
    // The member was taken from the pool: it is nobody's now, so it goes.
    if (member) co_await pool_.destroy(*member);
    co_return std::move(inserted).err();
  }
  spdlog::info("sandbox {} creating (org {}, image {}{})", rec.id, org_id, rec.snapshot, member ? ", from the pool" : "");

  if (member) {
    // Milliseconds: answered started whether or not the caller asked to wait.
    if (auto r = co_await provision_pooled(rec, std::move(proxy_secret)); !r) {
      if (auto cur = sandboxes_.get_sandbox(org_id, rec.id))
        (void)transitions_.set_state(*cur, "deleted", r.err().message);
      co_return std::move(r).err();
    }
    auto cur = sandboxes_.get_sandbox(org_id, rec.id);
    if (!cur) co_return std::move(cur).err();
    co_return view_of(*cur);
  }
  if (!req.wait) {
    asio::co_spawn(executor_, provision(rec, std::move(proxy_secret)), asio::detached);
    co_return view_of(rec);
  }
  if (auto r = co_await provision(rec, std::move(proxy_secret)); !r) {
    // The caller gets the error instead of an id, so no row may outlive it.
    if (auto cur = sandboxes_.get_sandbox(org_id, rec.id))
      (void)transitions_.set_state(*cur, "deleted", r.err().message);
    co_return std::move(r).err();
  }
  auto cur = sandboxes_.get_sandbox(org_id, rec.id);
  if (!cur) co_return std::move(cur).err();
  co_return view_of(*cur);
}

task<void> service::provision(store::sandbox_record rec, std::string proxy_secret) {
  auto fail = [&](const error& e) -> asio::awaitable<result<void>> {
    spdlog::warn("sandbox {} failed to start: {}", rec.id, e.message);
    (void)co_await transitions_.destroy_container(rec);
    if (auto cur = sandboxes_.get_sandbox(rec.org_id, rec.id))
      (void)transitions_.set_state(*cur, "error", e.message);
    co_return error(e);
  };
  // Deleted while we were waiting on Docker: clean up whatever exists by now.
  auto deleted_meanwhile = [&]() { return !sandboxes_.get_sandbox(rec.org_id, rec.id).ok(); };
  auto cancelled = make_error(errc::conflict, "sandbox " + rec.id + " was deleted while it was being created");

  auto image = co_await resolve_image_of(engine_, resources_, db_.instance_id(), rec);
  if (!image) co_return co_await fail(std::move(image).err());
  if (!*image) {
    (void)transitions_.set_state(rec, "pulling");
    if (auto pulled = co_await engine_.pull_image(rec.snapshot); !pulled) co_return co_await fail(std::move(pulled).err());
    if (deleted_meanwhile()) co_return cancelled;
    (void)transitions_.set_state(rec, "creating");
    image = co_await resolve_image_of(engine_, resources_, db_.instance_id(), rec);
    if (!image) co_return co_await fail(std::move(image).err());
    if (!*image) co_return co_await fail(make_error(errc::not_found, "image " + rec.snapshot + " not found"));
  }

  const auto spec = spec_from_json(rec.spec_json);
  auto container = container_for(cfg_, site(), rec, spec, proxy_secret, **image);
  auto mounts = volumes_.mounts_of(rec.id);
  if (!mounts) co_return co_await fail(std::move(mounts).err());
  container.volumes = std::move(*mounts);
  // The door of a sandbox that dials home is mounted: it must be there before the container.
  if (auto ready = agent_.prepare(agent_address_of(rec)); !ready) co_return co_await fail(std::move(ready).err());
  auto id = co_await engine_.create_container(container);
  if (!id) co_return co_await fail(std::move(id).err());
  rec.container_id = *id;
  if (deleted_meanwhile()) {
    (void)co_await transitions_.destroy_container(rec);
    co_return cancelled;
  }
  if (auto r = sandboxes_.update_sandbox(rec); !r) co_return co_await fail(std::move(r).err());
  if (auto r = co_await give_default_workdir(rec.container_id, spec); !r)
    co_return co_await fail(std::move(r).err());
  if (auto r = co_await install_interception_ca(rec, spec); !r) co_return co_await fail(std::move(r).err());

  if (auto r = co_await transitions_.start_and_wait(rec); !r) co_return co_await fail(std::move(r).err());
  if (deleted_meanwhile()) {
    (void)co_await transitions_.destroy_container(rec);
    co_return cancelled;
  }
  co_return co_await finish_start(rec);
}

task<void> service::finish_start(store::sandbox_record& rec) {
  if (auto r = transitions_.set_state(rec, "started"); !r) co_return r;
  activity_.touch(rec.id);
  spdlog::info("sandbox {} started", rec.id);
  // The kill switch went on while this one was being made: it stops like the others did.
  if (auto g = guardrails_.get_org_guardrails(rec.org_id); g && g->stopped_since)
    co_return co_await halt(rec, "stopped by the organization's kill switch", audit::system_actor(), std::nullopt,
                            stop_reason::kill_switch);
  co_return ok_t{};
}

// The agent makes /work at start, but as the sandbox's user it cannot take over a root-owned
// /work an image ships (the default image's), nor make one under a root-owned /. So for a
// sandbox of another user the engine, confined to the container's filesystem, puts /work there
// before the start, owned by that user as the container's passwd names it (a link the image
// planted at /work is replaced, never followed). An explicit workdir is the caller's to prepare.
task<void> service::give_default_workdir(const std::string& container_id, const sandbox_spec& spec) {
  static const std::set<std::string> root_users = {"", "root", "0", "root:root", "0:0", "root:0", "0:root"};
  if (!spec.workdir.empty() || root_users.count(spec.user)) co_return ok_t{};
  std::string name = std::string(default_workdir).substr(1);
  if (auto r = co_await engine_.put_archive(container_id, "/", docker::directory_archive(name), true); !r)
    co_return make_error(r.err().code, "cannot give " + std::string(default_workdir) + " to user " + spec.user + ": " +
                                           r.err().message);
  co_return ok_t{};
}

// The CA certificate (never its key) as a file of its own, and in a bundle with the daemon host's
// trust store, so that a client whose variable names the bundle still trusts every other host.
// Written as root-owned 0644 files into the container before its first start; a restart keeps them.
task<void> service::install_interception_ca(const store::sandbox_record& rec, const sandbox_spec& spec) {
  if (!spec.trusts_interception_ca) co_return ok_t{};
  if (!interception_ca_) co_return make_error(errc::unavailable, "secrets are not offered by this daemon");
  auto ca = interception_ca_(rec.org_id);
  if (!ca) co_return std::move(ca).err();
  std::string bundle;
  for (const char* system : {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"}) {
    std::ifstream in(system, std::ios::binary);
    if (!in) continue;
    std::ostringstream all;
    all << in.rdbuf();
    bundle = all.str();
    break;
  }
  if (!bundle.empty() && bundle.back() != '\n') bundle.push_back('\n');
  bundle += *ca;
  std::string ca_file = std::string(interception_ca_path).substr(1);
  std::string bundle_file = std::string(interception_bundle_path).substr(1);
  auto archive = docker::files_archive({{"usr/local/share/ca-certificates/", ""},
                                        {ca_file, *ca},
                                        {"etc/sandfort/", ""},
                                        {bundle_file, bundle}});
  if (auto r = co_await engine_.put_archive(rec.container_id, "/", std::move(archive), false); !r)
    co_return make_error(r.err().code, "cannot install the interception CA: " + r.err().message);
  co_return ok_t{};
}

task<sandbox_view> service::get(const std::string& org_id, const std::string& id_or_name, const std::string& wait_for,
                                std::chrono::milliseconds timeout) {
  static const std::vector<std::string> waitable = {"creating", "pulling", "started", "paused", "stopped", "error"};
  if (!wait_for.empty() && std::find(waitable.begin(), waitable.end(), wait_for) == waitable.end())
    co_return make_error(errc::invalid_argument, "wait_for must be one of creating, pulling, started, paused, stopped, error");
  auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto rec = sandboxes_.get_sandbox(org_id, id_or_name);
    if (!rec) co_return std::move(rec).err();
    bool settled = rec->state == wait_for || (wait_for == "started" && rec->state == "error");
    if (wait_for.empty() || settled || std::chrono::steady_clock::now() >= until) co_return view_of(*rec);
    co_await transitions_.wait_change(rec->id, until);
  }
}

task<list_page> service::list(const std::string& org_id, const list_request& req) {
  store::sandbox_filter filter;
  filter.state = req.state;
  filter.labels = req.labels;
  filter.after_id = req.cursor;
  filter.limit = req.limit + 1;  // one row past the page says whether another page follows
  // The store filters by state and labels in its query: one query per page, and pages are full.
  auto rows = sandboxes_.list_sandboxes(org_id, filter);
  if (!rows) co_return std::move(rows).err();
  list_page page;
  for (std::size_t i = 0; i < rows->size() && i < req.limit; ++i) page.items.push_back(view_of((*rows)[i]));
  if (rows->size() > req.limit && !page.items.empty()) page.next_cursor = page.items.back().id;
  co_return page;
}

task<sandbox_view> service::stop(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) {
  auto rec = sandboxes_.get_sandbox(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (rec->state == "stopped") co_return view_of(*rec);
  // Docker stops a paused container as it is: no need to thaw it first.
  if (rec->state != "started" && rec->state != "paused")
    co_return make_error(errc::conflict, "sandbox " + rec->id + " is " + rec->state + " and cannot be stopped");
  if (auto r = co_await halt(*rec, {}, who, std::nullopt, stop_reason::request); !r) co_return std::move(r).err();
  co_return view_of(*rec);
}

task<void> service::halt(store::sandbox_record& rec, const std::string& message, const audit::actor& who,
                         const std::optional<store::sandbox_deadline>& deadline, const char* reason) {
  // On a full state disk: only while the store's reserve can take the state change and its event.
  if (auto room = db_.admit(store::write_kind::relief); !room) co_return room;
  auto marked = reconciler_.begin_operation(rec.id);  // its die event is ours (container_events.cpp)
  if (auto r = co_await engine_.stop_container(rec.container_id, cfg_.stop_timeout_s); !r) co_return r;
  rec.address.clear();
  if (auto r = transitions_.set_state(rec, "stopped", message, who, "sandbox.stop", deadline, reason); !r) co_return r;
  transitions_.disconnect(rec.id);
  co_return ok_t{};
}

task<sandbox_view> service::start(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) {
  auto rec = sandboxes_.get_sandbox(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (rec->state == "started") co_return view_of(*rec);
  if (rec->state != "stopped")
    co_return make_error(errc::conflict, "sandbox " + rec->id + " is " + rec->state + " and cannot be started");
  if (admission_.starting(rec->id))
    co_return make_error(errc::conflict, "sandbox " + rec->id + " is being started");
  const auto spec = spec_from_json(rec->spec_json);
  if (auto admitted = admission_.admit(org_id, spec, rec->snapshot, rec->id, who); !admitted)
    co_return std::move(admitted).err();
  if (auto room = admission_.admit_to_host(org_id, spec.limits.memory_mb, rec->id, who, true); !room)
    co_return std::move(room).err();
  auto in_flight = admission_.begin_start(rec->id);  // counted as running, started or not
  activity_.touch(rec->id);
  auto started = co_await transitions_.start_and_wait(*rec);
  if (started && spec.pooled) {
    // A pooled sandbox's container holds no environment of its caller: its new agent is claimed
    // again, with a new proxy credential (the old one left with the processes that held it).
    std::string proxy_secret = random_hex(24);
    rec->proxy_secret_sha256 = sha256_hex(proxy_secret);
    started = co_await claim_agent(*rec, proxy_secret);
  }
  if (!started) {
    (void)transitions_.set_state(*rec, "error", started.err().message);
    co_return std::move(started).err();
  }
  if (auto r = transitions_.set_state(*rec, "started", {}, who, "sandbox.start"); !r) co_return std::move(r).err();
  co_return view_of(*rec);
}

task<void> service::remove(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) {
  auto rec = sandboxes_.get_sandbox(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  // Container first: if Docker is unreachable the row stays, so nothing runs unaccounted for. On
  // a full state disk it is removed only while the store's reserve can take the row's change and
  // its event: a delete is done whole or refused before anything goes.
  if (auto room = db_.admit(store::write_kind::relief); !room) co_return room;
  auto marked = reconciler_.begin_operation(rec->id);  // its die and destroy events are ours (container_events.cpp)
  if (auto r = co_await transitions_.destroy_container(*rec); !r) co_return r;
  rec->address.clear();
  if (auto r = transitions_.set_state(*rec, "deleted", {}, who, "sandbox.delete"); !r) co_return r;
  transitions_.disconnect(rec->id);
  activity_.forget(rec->id);
  spdlog::info("sandbox {} deleted", rec->id);
  co_return ok_t{};
}

task<sandbox_view> service::update(const std::string& org_id, const std::string& id_or_name, const update_request& req,
                                     const audit::actor& who) {
  auto rec = sandboxes_.get_sandbox(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  auto spec = spec_from_json(rec->spec_json);
  if (req.egress_allowlist || req.egress_deny || req.egress_rules) {
    // Each field given replaces its own; the set they make together is checked as a whole.
    if (req.egress_allowlist) spec.egress_allowlist = *req.egress_allowlist;
    if (req.egress_deny) spec.egress_deny = *req.egress_deny;
    if (req.egress_rules) spec.egress_rules = *req.egress_rules;
    if (auto r = proxy::validate_rule_set({spec.egress_allowlist, spec.egress_deny, spec.egress_rules}); !r)
      co_return std::move(r).err();
  }
  if (req.labels) {
    create_request probe;  // the same label rules as at creation
    probe.labels = *req.labels;
    if (auto r = validate_create(cfg_, probe); !r) co_return std::move(r).err();
    spec.labels = *req.labels;
  }
  if (req.idle_timeout_s) {
    if (auto r = check_idle_timeout(req.idle_timeout_s); !r) co_return std::move(r).err();
    spec.idle_timeout_s = *req.idle_timeout_s;
  }
  auto now = clock_.now();
  if (req.ttl_s) {
    if (*req.ttl_s <= 0 || *req.ttl_s > 30LL * 24 * 3600)
      co_return make_error(errc::invalid_argument, "ttl_s must be between 1 and 2592000 (30 days)");
    // A new TTL counts from now, as in E2B's set_timeout: "keep it alive for another hour".
    spec.ttl_s = *req.ttl_s;
    rec->expires_at = format_time(now + std::chrono::seconds(*req.ttl_s));
  }
  rec->spec_json = spec_to_json(spec);
  rec->updated_at = format_time(now);
  auto updated = journal_.record_change(
      {rec->org_id}, who, [&] { return sandboxes_.update_sandbox_spec(*rec); },
      [&] { return audit::record{"sandbox.update", rec->id, "ok", {{"spec", spec_for_audit(rec->spec_json)}}}; });
  if (!updated) co_return std::move(updated).err();
  spdlog::info("sandbox {} updated", rec->id);
  co_return view_of(*rec);
}

task<sandbox_metrics> service::metrics(const std::string& org_id, const std::string& id_or_name) {
  auto rec = require_started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  std::string id = rec->id;
  auto sample = co_await engine_.stats(rec->container_id);
  if (!sample) co_return std::move(sample).err();
  sandbox_metrics m;
  m.cpu_percent = sample->cpu_percent;
  m.memory_bytes = sample->memory_bytes;
  m.memory_limit_bytes = sample->memory_limit_bytes;
  m.pids = sample->pids;
  if (egress_meter_) {
    auto t = egress_meter_(id);
    m.egress_bytes_in = t.bytes_in;
    m.egress_bytes_out = t.bytes_out;
    m.egress_allowed = t.allowed;
    m.egress_denied = t.denied;
  }
  // The measuring loop's last figure; measured now when it has none yet (a sandbox just started).
  m.disk_bytes = disk_.last_bytes(id);
  if (!m.disk_bytes)
    if (auto d = co_await disk_.measure(*rec)) m.disk_bytes = d->bytes;
  co_return m;
}

container_site service::site() const {
  return {db_.instance_id(), net_.info().name, net_.info().gateway, disk_.hard_enforcement(), home_root(cfg_),
          cfg_.gvisor_runtime.empty() ? std::string{} : gvisor_preload_path(cfg_)};
}

sandbox_view service::view_of(const store::sandbox_record& rec) const {
  auto v = to_view(rec);
  v.spec.limits.disk_mb = disk_limit_mb(v.spec.limits, cfg_.disk);
  v.preview_url_template = net_.preview_url_template(rec.id);
  return v;
}

// A pooled sandbox's claim (docs/pool.md): its agent gets the caller's environment and working
// directory, at create and again at each start (a restarted container runs a new agent).
task<void> service::claim_agent(const store::sandbox_record& rec, const std::string& proxy_secret) {
  auto spec = spec_from_json(rec.spec_json);
  auto env = sandbox_environment(rec.id, spec, proxy_secret, net_.info().gateway, cfg_.egress.proxy_port);
  co_return co_await agent_.claim(agent_address_of(rec), std::move(env), effective_workdir(spec));
}

task<void> service::provision_pooled(store::sandbox_record& rec, std::string proxy_secret) {
  auto claimed = co_await claim_agent(rec, proxy_secret);
  if (claimed) {
    // Deleted while the agent answered: the delete removed the container with the row.
    if (!sandboxes_.get_sandbox(rec.org_id, rec.id))
      co_return make_error(errc::conflict, "sandbox " + rec.id + " was deleted while it was being created");
    co_return co_await finish_start(rec);
  }
  // The member died waiting (or its agent misbehaves): made cold instead, under the same row.
  spdlog::warn("sandbox {}: the pool's member did not take the claim ({}); creating it cold", rec.id,
               claimed.err().message);
  (void)co_await transitions_.destroy_container(rec);
  rec.container_id.clear();
  rec.address.clear();
  auto spec = spec_from_json(rec.spec_json);
  spec.pooled = false;
  rec.spec_json = spec_to_json(spec);
  {  // both or neither (a full disk may refuse the second)
    auto tx = db_.begin();
    if (!tx) co_return std::move(tx).err();
    if (auto r = sandboxes_.update_sandbox_spec(rec); !r) co_return r;
    if (auto r = sandboxes_.update_sandbox(rec); !r) co_return r;
    if (auto r = tx->commit(); !r) co_return r;
  }
  co_return co_await provision(rec, std::move(proxy_secret));
}

task<void> service::ready() {
  if (auto r = db_.ping(); !r) co_return make_error(errc::unavailable, "store: " + r.err().message);
  // Reads, deletes and stops are still served; every other change is refused with 507.
  if (auto space = db_.space(); space.full)
    co_return make_error(errc::unavailable, "store: the state directory's disk is full (" + space.reason +
                                                "): changes are refused until space returns");
  auto v = co_await engine_.version();
  if (!v) co_return make_error(errc::unavailable, "docker: " + v.err().message);
  if (!reconciler_.reconciled()) co_return make_error(errc::unavailable, "start-up reconciliation with Docker has not finished");
  co_return ok_t{};
}

}  // namespace sandfort::sandbox
