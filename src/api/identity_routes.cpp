// Organizations, API keys and whoami.
#include "json_body.hpp"
#include "org_lifecycle.hpp"
#include "routes.hpp"

namespace sandfort::api {

using nlohmann::json;
using boost::asio::awaitable;

namespace {

json org_json(const store::org& o) {
  return {{"id", o.id},
          {"name", o.name},
          {"superadmin", o.superadmin},
          {"state", o.state},
          {"created_at", o.created_at},
          {"state_changed_at", o.state_changed_at ? json(*o.state_changed_at) : json(nullptr)}};
}

json key_json(const store::api_key& k) {
  json j = {{"id", k.id}, {"name", k.name}, {"role", k.role}, {"org_id", k.org_id}, {"created_at", k.created_at}};
  j["expires_at"] = k.expires_at ? json(*k.expires_at) : json(nullptr);
  j["revoked_at"] = k.revoked_at ? json(*k.revoked_at) : json(nullptr);
  j["last_used_at"] = k.last_used_at ? json(*k.last_used_at) : json(nullptr);
  return j;
}

// The chains an action on org_id goes into: that organization's, and the actor's own when it is
// another (the superadmin acting on a tenant).
std::vector<std::string> chains_of(const auth::principal& p, const std::string& org_id) {
  if (p.org_id == org_id) return {org_id};
  return {org_id, p.org_id};
}

// Shared by POST /v1/api-keys and the superadmin's POST /v1/orgs/{org}/api-keys.
http::response create_key(dependencies& deps, http::context& ctx, const auth::principal& p, const std::string& org_id) {
  auto body = parse_object(ctx.req);
  if (!body) return http::error_response(body.err(), ctx.request_id);
  std::string name, role_name;
  std::optional<std::int64_t> expires_in_s;
  for (auto r : {read(*body, "name", name), read(*body, "role", role_name), read(*body, "expires_in_s", expires_in_s)})
    if (!r) return http::error_response(r.err(), ctx.request_id);
  if (role_name.empty()) role_name = "member";
  auto role = auth::parse_role(role_name);
  if (!role) return http::error_response(role.err(), ctx.request_id);
  if (expires_in_s && *expires_in_s <= 0)
    return http::error_response(make_error(errc::invalid_argument, "expires_in_s must be positive"), ctx.request_id);
  auto issued = deps.identity.issue_key(chains_of(p, org_id), actor_of(p, ctx.request_id, ctx.remote), org_id, name,
                                       *role, expires_in_s.value_or(0));
  if (!issued) return http::error_response(issued.err(), ctx.request_id);
  json j = key_json(issued->record);
  j["key"] = issued->secret;
  return http::json_response(201, j);
}

}  // namespace

json whoami_json(const auth::principal& p) {
  json j = {{"org", p.org_name},
            {"org_id", p.org_id},
            {"principal", p.id},
            {"principal_name", p.name},
            {"role", auth::to_string(p.granted)},
            {"superadmin", p.superadmin},
            {"auth", auth::to_string(p.via)}};
  if (p.via == auth::method::oidc) j["issuer"] = p.issuer;
  return j;
}

std::vector<api_route> identity_routes() {
  using auth::permission;
  return {
      {http::verb::get, "/v1/whoami", permission::read,
       [](dependencies&, http::context&, const auth::principal& p) -> awaitable<http::response> {
         co_return http::json_response(200, whoami_json(p));
       }},
      {http::verb::post, "/v1/orgs", permission::superadmin,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto body = parse_object(ctx.req);
         if (!body) co_return http::error_response(body.err(), ctx.request_id);
         std::string name;
         if (auto r = read(*body, "name", name); !r) co_return http::error_response(r.err(), ctx.request_id);
         if (name.empty() || name.size() > 100)
           co_return http::error_response(make_error(errc::invalid_argument, "name must be 1-100 characters"),
                                          ctx.request_id);
         auto o = deps.identity.create_org(name, p.org_id, actor_of(p, ctx.request_id, ctx.remote));
         if (!o) co_return http::error_response(o.err(), ctx.request_id);
         co_return http::json_response(201, org_json(*o));
       }},
      {http::verb::get, "/v1/orgs", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         json items = json::array();
         if (p.superadmin) {
           auto all = deps.identity.list_orgs();
           if (!all) co_return http::error_response(all.err(), ctx.request_id);
           for (const auto& o : *all) items.push_back(org_json(o));
         } else {
           auto own = deps.identity.find_org(p.org_id);
           if (!own) co_return http::error_response(own.err(), ctx.request_id);
           items.push_back(org_json(*own));
         }
         co_return http::json_response(200, {{"items", items}, {"next_cursor", nullptr}});
       }},
      {http::verb::post, "/v1/orgs/{org}/api-keys", permission::superadmin,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto o = deps.identity.find_org(ctx.params["org"]);
         if (o && o->state != "active")
           o = make_error(errc::conflict, "organization " + o->name + " is " + o->state);
         if (!o) co_return http::error_response(o.err(), ctx.request_id);
         co_return create_key(deps, ctx, p, o->id);
       }},
      {http::verb::post, "/v1/orgs/{org}/disable", permission::superadmin,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto o = co_await disable_org(deps, p, who, ctx.params["org"]);
         if (!o) co_return http::error_response(o.err(), ctx.request_id);
         co_return http::json_response(200, org_json(*o));
       }},
      {http::verb::post, "/v1/orgs/{org}/enable", permission::superadmin,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto o = co_await enable_org(deps, p, who, ctx.params["org"]);
         if (!o) co_return http::error_response(o.err(), ctx.request_id);
         co_return http::json_response(200, org_json(*o));
       }},
      {http::verb::delete_, "/v1/orgs/{org}", permission::superadmin,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await delete_org(deps, p, who, ctx.params["org"]);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::empty_response(204);
       }},
      {http::verb::post, "/v1/api-keys", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         co_return create_key(deps, ctx, p, p.org_id);
       }},
      {http::verb::get, "/v1/api-keys", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto keys = deps.identity.list_keys(p.org_id);
         if (!keys) co_return http::error_response(keys.err(), ctx.request_id);
         json items = json::array();
         for (const auto& k : *keys) items.push_back(key_json(k));
         co_return http::json_response(200, {{"items", items}, {"next_cursor", nullptr}});
       }},
      {http::verb::delete_, "/v1/api-keys/{id}", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         const std::string key_id = ctx.params["id"];
         auto r = deps.identity.revoke_key(p.org_id, key_id, actor_of(p, ctx.request_id, ctx.remote));
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::empty_response(204);
       }},
  };
}

}  // namespace sandfort::api
