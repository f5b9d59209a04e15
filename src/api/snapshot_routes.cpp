// An organization's snapshots: parse → call the sandbox service → serialize.
#include "json_body.hpp"
#include "routes.hpp"

namespace sandfort::api {

using nlohmann::json;
using boost::asio::awaitable;

namespace {

json snapshot_json(const sandbox::snapshot_view& s) {
  return {{"id", s.id},
          {"name", s.name},
          {"size_bytes", s.size_bytes},
          {"source_sandbox_id", s.source_sandbox_id},
          {"state", s.state},
          {"created_at", s.created_at},
          {"updated_at", s.updated_at}};
}

result<sandbox::snapshot_create_request> parse_snapshot_create(const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  for (const auto& [key, unused] : body->items())
    if (key != "name" && key != "sandbox_id")
      return make_error(errc::invalid_argument, "field '" + key + "' is not known (sandbox_id, name)");
  sandbox::snapshot_create_request c;
  for (auto r : {read(*body, "sandbox_id", c.sandbox_id), read(*body, "name", c.name)})
    if (!r) return std::move(r).err();
  return c;
}


}  // namespace

std::vector<api_route> snapshot_routes() {
  using auth::permission;
  return {
      {http::verb::post, "/v1/snapshots", permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.snapshots;
         auto req = parse_snapshot_create(ctx.req);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await svc.create(p.org_id, *req, who);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(201, snapshot_json(*r));
       }},
      {http::verb::get, "/v1/snapshots", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.snapshots;
         auto req = parse_name_page(ctx);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         auto r = svc.list(p.org_id, *req);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         json items = json::array();
         for (const auto& s : r->items) items.push_back(snapshot_json(s));
         co_return http::json_response(
             200, json{{"items", items}, {"next_cursor", r->next_cursor.empty() ? json(nullptr) : json(r->next_cursor)}});
       }},
      {http::verb::get, "/v1/snapshots/{name}", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.snapshots;
         auto r = svc.get(p.org_id, ctx.params["name"]);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, snapshot_json(*r));
       }},
      {http::verb::delete_, "/v1/snapshots/{name}", permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.snapshots;
         auto name = ctx.params["name"];
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await svc.remove(p.org_id, name, who);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::empty_response(204);
       }},
  };
}

}  // namespace sandfort::api
