// An organization's volumes: parse → call the sandbox service → serialize.
#include "json_body.hpp"
#include "routes.hpp"

namespace sandfort::api {

using nlohmann::json;
using boost::asio::awaitable;

namespace {

json volume_json(const sandbox::volume_view& v) {
  return {{"id", v.id},
          {"name", v.name},
          {"size_mb", v.size_mb ? json(*v.size_mb) : json(nullptr)},
          {"state", v.state},
          {"created_at", v.created_at},
          {"updated_at", v.updated_at}};
}

result<sandbox::volume_create_request> parse_volume_create(const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  for (const auto& [key, unused] : body->items())
    if (key != "name" && key != "size_mb")
      return make_error(errc::invalid_argument, "field '" + key + "' is not known (name, size_mb)");
  sandbox::volume_create_request c;
  for (auto r : {read(*body, "name", c.name), read(*body, "size_mb", c.size_mb)})
    if (!r) return std::move(r).err();
  return c;
}


}  // namespace

std::vector<api_route> volume_routes() {
  using auth::permission;
  return {
      {http::verb::post, "/v1/volumes", permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.volumes;
         auto req = parse_volume_create(ctx.req);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await svc.create(p.org_id, *req, who);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(201, volume_json(*r));
       }},
      {http::verb::get, "/v1/volumes", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.volumes;
         auto req = parse_name_page(ctx);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         auto r = svc.list(p.org_id, *req);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         json items = json::array();
         for (const auto& v : r->items) items.push_back(volume_json(v));
         co_return http::json_response(
             200, json{{"items", items}, {"next_cursor", r->next_cursor.empty() ? json(nullptr) : json(r->next_cursor)}});
       }},
      {http::verb::get, "/v1/volumes/{name}", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.volumes;
         auto r = svc.get(p.org_id, ctx.params["name"]);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, volume_json(*r));
       }},
      {http::verb::delete_, "/v1/volumes/{name}", permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.volumes;
         auto name = ctx.params["name"];
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await svc.remove(p.org_id, name, who);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::empty_response(204);
       }},
  };
}

}  // namespace sandfort::api
