// The control plane's snapshots, fork, metrics and network, over the native services: an E2B
// snapshot is a Sandfort snapshot (the sandbox's filesystem committed as an image of its
// organization's; memory and processes are not kept), a fork is a snapshot and sandboxes made
// from it, metrics are the native metrics' one sample, and E2B's network settings become the
// egress allowlist, never opening more than a native create or PATCH could (docs/e2b.md).
#include <algorithm>
#include <chrono>

#include "json_body.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/ids.hpp"
#include "wire.hpp"

namespace sandfort::compat::e2b {

namespace {

// E2B's "all traffic" CIDR: the native allowlist's "*".
constexpr const char* all_traffic = "0.0.0.0/0";
// Sandboxes one fork call may make (each within the organization's quotas).
constexpr std::int64_t max_forks = 16;
// A fork's timeout when none is given: E2B's default sandbox timeout.
constexpr std::int64_t default_fork_timeout_s = 300;

http::response refused(const error& e, const http::context& ctx) { return rest_error(e, ctx.request_id); }

// An E2B snapshot as the SDK reads it.
json snapshot_json(const sandbox::snapshot_view& s) {
  return json{{"snapshotID", s.id}, {"names", json::array({s.name})}};
}

// A name for a snapshot the caller did not name (E2B's are optional, Sandfort's are not).
std::string generated_name(const char* prefix) { return std::string(prefix) + random_hex(6); }

}  // namespace

result<std::optional<std::vector<std::string>>> egress_of(const json& body) {
  std::optional<std::vector<std::string>> out;
  auto internet = body.find("allow_internet_access");
  if (internet != body.end() && !internet->is_null()) {
    if (!internet->is_boolean()) return make_error(errc::invalid_argument, "allow_internet_access must be a boolean");
    // false: nothing beyond what allowOut names. true is E2B's default and opens nothing here:
    // the egress a sandbox has is what is named (network.allowOut, as the native allowlist).
    if (!internet->get<bool>()) out.emplace();
  }
  const json* network = &body;  // a network update's body is the network itself
  if (auto n = body.find("network"); n != body.end()) {
    if (n->is_null()) return out;
    if (!n->is_object()) return make_error(errc::invalid_argument, "network must be an object");
    network = &*n;
  }
  for (const char* unsupported : {"egressProxy", "rules"})
    if (auto it = network->find(unsupported); it != network->end() && !it->is_null())
      return make_error(errc::invalid_argument,
                        std::string("network.") + unsupported + " is not served by Sandfort (docs/e2b.md, \"Network\")");
  auto allow = network->find("allowOut");
  if (allow != network->end() && !allow->is_null()) {
    if (!allow->is_array()) return make_error(errc::invalid_argument, "network.allowOut must be a list of strings");
    std::vector<std::string> hosts;
    for (const auto& h : *allow) {
      if (!h.is_string()) return make_error(errc::invalid_argument, "network.allowOut must be a list of strings");
      // The native create validates each (host names, *.suffix, *), as it does its own.
      hosts.push_back(h.get<std::string>() == all_traffic ? "*" : h.get<std::string>());
    }
    out = std::move(hosts);
  }
  // denyOut: everything not allowed is denied already (E2B's allowOut wins over denyOut too).
  return out;
}

namespace {

// The sandbox a fork makes: the source's settings, its snapshot's filesystem.
sandbox::create_request fork_request(const sandbox::sandbox_view& source, const std::string& snapshot_id,
                                     std::int64_t timeout_s) {
  sandbox::create_request req;
  req.snapshot = snapshot_id;
  req.wait = true;
  req.env = source.spec.env;
  req.labels = source.spec.labels;
  req.cpus = source.spec.limits.cpus;
  req.memory_mb = source.spec.limits.memory_mb;
  req.pids = source.spec.limits.pids;
  if (source.spec.limits.disk_mb > 0) req.disk_mb = source.spec.limits.disk_mb;
  // The source's whole egress policy: a fork reaches what its source reached, no more.
  req.egress_allowlist = source.spec.egress_allowlist;
  req.egress_deny = source.spec.egress_deny;
  req.egress_rules = source.spec.egress_rules;
  req.egress_given = true;
  req.user = source.spec.user;
  req.workdir = source.spec.workdir;
  req.public_preview = source.spec.public_preview;
  req.ttl_s = timeout_s;
  req.idle_timeout_s = 0;
  return req;
}

json fork_failure(const error& e) {
  return json{{"error", json{{"code", static_cast<unsigned>(http_status(e.code))}, {"message", e.message}}}};
}

json fork_success(json sandbox) { return json{{"sandbox", std::move(sandbox)}}; }

// One sample of the native metrics as E2B's SandboxMetric.
json metric_json(const sandbox::sandbox_view& v, const sandbox::sandbox_metrics& m) {
  return json::array({json{{"timestamp", format_time(std::chrono::system_clock::now())},
                           {"timestampUnix", std::chrono::duration_cast<std::chrono::seconds>(
                                                 std::chrono::system_clock::now().time_since_epoch()).count()},
                           {"cpuUsedPct", m.cpu_percent},
                           {"cpuCount", v.spec.limits.cpus},
                           {"memUsed", m.memory_bytes},
                           {"memTotal", m.memory_limit_bytes},
                           {"memCache", 0},
                           {"diskUsed", m.disk_bytes.value_or(0)},
                           {"diskTotal", v.spec.limits.disk_mb * 1024 * 1024}}});
}

}  // namespace

// POST /sandboxes/{id}/snapshots {name?}: a Sandfort snapshot of the sandbox's filesystem.
awaitable<http::response> create_snapshot(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto body = api::parse_object(ctx.req.body().empty() ? std::string("{}") : ctx.req.body());
  if (!body) co_return refused(body.err(), ctx);
  sandbox::snapshot_create_request req;
  req.sandbox_id = ctx.params["id"];
  if (auto r = api::read(*body, "name", req.name); !r) co_return refused(r.err(), ctx);
  if (req.name.empty()) req.name = generated_name("e2b-");
  auto made = co_await deps.snapshots.create(p.org_id, req, api::actor_of(p, ctx.request_id, ctx.remote));
  if (!made) co_return refused(made.err(), ctx);
  co_return http::json_response(201, snapshot_json(*made));
}

// GET /snapshots?sandboxID=&name=&limit=&nextToken=: the organization's snapshots by name, those
// of one sandbox or of one name when asked. The next token is the last name looked at.
awaitable<http::response> list_snapshots(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto limit = api::query_int(ctx, "limit");
  if (!limit) co_return refused(limit.err(), ctx);
  const std::size_t want = static_cast<std::size_t>(std::clamp<std::int64_t>(limit->value_or(100), 1, 1000));
  const std::string of_sandbox = ctx.query.count("sandboxID") ? ctx.query["sandboxID"] : std::string();
  const std::string named = ctx.query.count("name") ? ctx.query["name"] : std::string();
  sandbox::name_page_request page_req;
  page_req.limit = want;
  if (auto it = ctx.query.find("nextToken"); it != ctx.query.end()) page_req.cursor = it->second;
  json items = json::array();
  std::string next;  // empty: no more
  for (int pages = 0; pages < 100 && items.size() < want; ++pages) {
    auto page = deps.snapshots.list(p.org_id, page_req);
    if (!page) co_return refused(page.err(), ctx);
    next = page->next_cursor;
    for (const auto& s : page->items) {
      if (!of_sandbox.empty() && s.source_sandbox_id != of_sandbox) continue;
      if (!named.empty() && s.name != named) continue;
      items.push_back(snapshot_json(s));
      if (items.size() >= want) {
        next = s.name;  // the next page starts after it
        break;
      }
    }
    if (next.empty()) break;
    page_req.cursor = next;
  }
  co_return page_response(items, next);
}

// DELETE /templates/{id} (the SDK's deleteSnapshot): the snapshot, by id or name. Templates are
// not Sandfort's: any other id is not found.
awaitable<http::response> delete_snapshot(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto r = co_await deps.snapshots.remove(p.org_id, ctx.params["id"], api::actor_of(p, ctx.request_id, ctx.remote));
  if (!r) co_return refused(r.err(), ctx);
  co_return http::empty_response(204);
}

// POST /sandboxes/{id}/fork {timeout?, count?}: a snapshot of the sandbox's filesystem (named
// e2b-fork-…, kept: it is what the forks are made from), then `count` sandboxes made from it with
// the source's settings. Memory and running processes are not copied. One entry per fork.
awaitable<http::response> fork_sandbox(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto body = api::parse_object(ctx.req.body().empty() ? std::string("{}") : ctx.req.body());
  if (!body) co_return refused(body.err(), ctx);
  std::optional<std::int64_t> timeout, count;
  if (auto r = api::read(*body, "timeout", timeout); !r) co_return refused(r.err(), ctx);
  if (auto r = api::read(*body, "count", count); !r) co_return refused(r.err(), ctx);
  if (timeout && (*timeout < 1 || *timeout > 86400))
    co_return refused(make_error(errc::invalid_argument, "timeout must be between 1 and 86400 seconds"), ctx);
  const std::int64_t forks = count.value_or(1);
  if (forks < 1 || forks > max_forks)
    co_return refused(make_error(errc::invalid_argument, "count must be between 1 and 16"), ctx);
  const auto who = api::actor_of(p, ctx.request_id, ctx.remote);
  auto source = co_await deps.sandboxes.get(p.org_id, ctx.params["id"], "", std::chrono::seconds(0));
  if (!source) co_return refused(source.err(), ctx);
  sandbox::snapshot_create_request snap_req;
  snap_req.sandbox_id = source->id;
  snap_req.name = generated_name("e2b-fork-");
  auto snap = co_await deps.snapshots.create(p.org_id, snap_req, who);
  if (!snap) co_return refused(snap.err(), ctx);
  json answers = json::array();
  for (std::int64_t i = 0; i < forks; ++i) {
    auto made = co_await deps.sandboxes.create(p.org_id, fork_request(*source, snap->id, timeout.value_or(default_fork_timeout_s)), who);
    if (!made) {
      answers.push_back(fork_failure(made.err()));
      continue;
    }
    auto answered = with_new_token(*made);
    answers.push_back(answered ? fork_success(std::move(*answered)) : fork_failure(answered.err()));
  }
  co_return http::json_response(200, answers);
}

// GET /sandboxes/{id}/metrics: the native metrics now (one sample: Sandfort keeps no history, so
// start and end are not honoured); a sandbox that is not started has none ([]).
awaitable<http::response> get_metrics(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto v = co_await deps.sandboxes.get(p.org_id, ctx.params["id"], "", std::chrono::seconds(0));
  if (!v) co_return refused(v.err(), ctx);
  if (v->state != "started") co_return http::json_response(200, json::array());
  auto m = co_await deps.sandboxes.metrics(p.org_id, v->id);
  if (!m) {
    if (m.err().code == errc::conflict) co_return http::json_response(200, json::array());
    co_return refused(m.err(), ctx);
  }
  co_return http::json_response(200, metric_json(*v, *m));
}

// PUT /sandboxes/{id}/network: the egress replaced (E2B: omitted fields are cleared), as a
// native PATCH of egress_allowlist.
awaitable<http::response> update_network(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto body = api::parse_object(ctx.req.body().empty() ? std::string("{}") : ctx.req.body());
  if (!body) co_return refused(body.err(), ctx);
  auto egress = egress_of(*body);
  if (!egress) co_return refused(egress.err(), ctx);
  sandbox::update_request u;
  u.egress_allowlist = egress->value_or(std::vector<std::string>{});
  auto r = co_await deps.sandboxes.update(p.org_id, ctx.params["id"], u, api::actor_of(p, ctx.request_id, ctx.remote));
  if (!r) co_return refused(r.err(), ctx);
  co_return http::empty_response(204);
}

}  // namespace sandfort::compat::e2b
