// An organization's guardrails: its limits and their use, and its kill switch (docs/guardrails.md).
#include "json_body.hpp"
#include "routes.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::api {

using nlohmann::json;
using boost::asio::awaitable;

namespace {

json limits_json(const sandbox::org_guardrails_view& v) {
  const auto& l = v.limits;
  return {{"org_id", v.org_id},
          {"limits",
           {{"max_sandboxes", l.max_sandboxes},
            {"max_cpus", l.max_cpus},
            {"max_memory_mb", l.max_memory_mb},
            {"allowed_images", l.allowed_images},
            {"max_volumes", l.max_volumes},
            {"max_snapshots", l.max_snapshots},
            {"max_disk_mb", l.max_disk_mb},
            {"allowed_runtimes", l.allowed_runtimes}}},
          {"own", v.own_fields},
          {"usage",
           {{"sandboxes", v.usage.sandboxes},
            {"running", v.usage.running},
            {"cpus", v.usage.cpus},
            {"memory_mb", v.usage.memory_mb},
            {"volumes", v.usage.volumes},
            {"snapshots", v.usage.snapshots},
            {"disk_mb", v.usage.disk_mb}}},
          {"stopped", v.stopped_since ? json{{"since", *v.stopped_since}, {"by_superadmin", v.stopped_by_superadmin}}
                                      : json(nullptr)}};
}

// The organization `{org}` names (resolve_target_org); a deleted one has no limits or sandboxes
// left to act on, so it is not_found like one that never was.
result<std::string> org_in_path(dependencies& deps, const http::context& ctx, const auth::principal& p) {
  auto it = ctx.params.find("org");
  return resolve_target_org(deps, p, it == ctx.params.end() ? std::string() : it->second, deleted_orgs::refused);
}

// A field that is absent stays as it is; null resets it to the configured default.
template <typename T>
result<void> read_nullable(const json& body, const char* key, std::optional<std::optional<T>>& out) {
  if (!body.contains(key)) return {};
  if (body.at(key).is_null()) {
    out.emplace();
    return {};
  }
  std::optional<T> v;
  if (auto r = read(body, key, v); !r) return r;
  out.emplace(std::move(v));
  return {};
}

result<sandbox::limits_update> parse_limits(const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  for (const auto& [key, unused] : body->items())
    if (key != "max_sandboxes" && key != "max_cpus" && key != "max_memory_mb" && key != "allowed_images" &&
        key != "max_volumes" && key != "max_snapshots" && key != "max_disk_mb" && key != "allowed_runtimes")
      return make_error(errc::invalid_argument,
                        "field '" + key +
                            "' is not a limit (max_sandboxes, max_cpus, max_memory_mb, allowed_images, max_volumes, "
                            "max_snapshots, max_disk_mb, allowed_runtimes)");
  sandbox::limits_update u;
  for (auto r : {read_nullable(*body, "max_sandboxes", u.max_sandboxes), read_nullable(*body, "max_cpus", u.max_cpus),
                 read_nullable(*body, "max_memory_mb", u.max_memory_mb),
                 read_nullable(*body, "allowed_images", u.allowed_images),
                 read_nullable(*body, "max_volumes", u.max_volumes),
                 read_nullable(*body, "max_snapshots", u.max_snapshots),
                 read_nullable(*body, "max_disk_mb", u.max_disk_mb),
                 read_nullable(*body, "allowed_runtimes", u.allowed_runtimes)})
    if (!r) return std::move(r).err();
  return u;
}

json egress_defaults_json(const std::string& org_id, const std::optional<proxy::egress_rule_set>& set) {
  json policy = nullptr;
  if (set)
    policy = {{"egress_allowlist", set->allow},
              {"egress_deny", set->deny},
              {"egress_rules", sandbox::egress_rules_to_json(set->rules)}};
  return {{"org_id", org_id}, {"egress_defaults", policy}};
}

// {"egress_defaults": {egress_allowlist?, egress_deny?, egress_rules?} | null}
result<std::optional<proxy::egress_rule_set>> parse_egress_defaults(const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  for (const auto& [key, unused] : body->items())
    if (key != "egress_defaults")
      return make_error(errc::invalid_argument, "unknown field '" + key + "' (egress_defaults)");
  if (!body->contains("egress_defaults"))
    return make_error(errc::invalid_argument, "field 'egress_defaults' is required (an object, or null to remove them)");
  const json& d = body->at("egress_defaults");
  if (d.is_null()) return std::optional<proxy::egress_rule_set>();
  if (!d.is_object())
    return make_error(errc::invalid_argument, "egress_defaults must be {egress_allowlist?, egress_deny?, egress_rules?} or null");
  proxy::egress_rule_set set;
  for (const auto& [key, unused] : d.items())
    if (key != "egress_allowlist" && key != "egress_deny" && key != "egress_rules")
      return make_error(errc::invalid_argument,
                        "egress_defaults: unknown field '" + key + "' (egress_allowlist, egress_deny, egress_rules)");
  for (auto r : {read(d, "egress_allowlist", set.allow), read(d, "egress_deny", set.deny)})
    if (!r) return std::move(r).err();
  if (d.contains("egress_rules") && !d["egress_rules"].is_null()) {
    auto rules = sandbox::egress_rules_from_json(d["egress_rules"]);
    if (!rules) return std::move(rules).err();
    set.rules = std::move(*rules);
  }
  return std::optional<proxy::egress_rule_set>(std::move(set));
}

}  // namespace

std::vector<api_route> guardrail_routes() {
  using auth::permission;
  return {
      {http::verb::get, "/v1/orgs/{org}/limits", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto org = org_in_path(deps, ctx, p);
         if (!org) co_return http::error_response(org.err(), ctx.request_id);
         auto v = deps.guardrails.guardrails(*org);
         if (!v) co_return http::error_response(v.err(), ctx.request_id);
         co_return http::json_response(200, limits_json(*v));
       }},
      // The operator sets what an organization may take; its own admin reads it.
      {http::verb::put, "/v1/orgs/{org}/limits", permission::superadmin,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto org = org_in_path(deps, ctx, p);
         if (!org) co_return http::error_response(org.err(), ctx.request_id);
         auto u = parse_limits(ctx.req);
         if (!u) co_return http::error_response(u.err(), ctx.request_id);
         auto v = deps.guardrails.set_limits(*org, *u, actor_of(p, ctx.request_id, ctx.remote));
         if (!v) co_return http::error_response(v.err(), ctx.request_id);
         co_return http::json_response(200, limits_json(*v));
       }},
      // The egress policy of sandboxes created without one (docs/egress.md): every member may read
      // what their sandboxes will get; the organization's admin sets it.
      {http::verb::get, "/v1/orgs/{org}/egress-defaults", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto org = org_in_path(deps, ctx, p);
         if (!org) co_return http::error_response(org.err(), ctx.request_id);
         auto v = deps.guardrails.egress_defaults(*org);
         if (!v) co_return http::error_response(v.err(), ctx.request_id);
         co_return http::json_response(200, egress_defaults_json(*org, *v));
       }},
      {http::verb::put, "/v1/orgs/{org}/egress-defaults", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto org = org_in_path(deps, ctx, p);
         if (!org) co_return http::error_response(org.err(), ctx.request_id);
         auto set = parse_egress_defaults(ctx.req);
         if (!set) co_return http::error_response(set.err(), ctx.request_id);
         auto v = deps.guardrails.set_egress_defaults(*org, *set, actor_of(p, ctx.request_id, ctx.remote));
         if (!v) co_return http::error_response(v.err(), ctx.request_id);
         co_return http::json_response(200, egress_defaults_json(*org, *v));
       }},
      {http::verb::post, "/v1/orgs/{org}/stop-all", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto org = org_in_path(deps, ctx, p);
         if (!org) co_return http::error_response(org.err(), ctx.request_id);
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto report = co_await deps.guardrails.stop_all(*org, p.superadmin, who);
         if (!report) co_return http::error_response(report.err(), ctx.request_id);
         co_return http::json_response(200, {{"org_id", *org}, {"stopped", report->stopped}, {"failed", report->failed}});
       }},
      {http::verb::delete_, "/v1/orgs/{org}/stop-all", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto org = org_in_path(deps, ctx, p);
         if (!org) co_return http::error_response(org.err(), ctx.request_id);
         if (auto r = deps.guardrails.lift_stop(*org, p.superadmin, actor_of(p, ctx.request_id, ctx.remote)); !r)
           co_return http::error_response(r.err(), ctx.request_id);
         co_return http::empty_response(204);
       }},
  };
}

}  // namespace sandfort::api
