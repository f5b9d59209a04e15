#pragma once
// Private to the api module: the four routes of an organization's named resources, volumes and
// snapshots (volume_routes.cpp, snapshot_routes.cpp) — create, list by name, get, delete — written
// once over their one backend template (named_resource_backend). A kind is a struct that gives
// only what differs: `create` (its create request's type), `collection` ("/v1/volumes"; one
// resource is at …/{name}), `fields` (a create body's fields, body_field each), `backend(deps)`
// and `to_json(view)` (over named_json).

#include <string>
#include <tuple>
#include <vector>

#include "json_body.hpp"
#include "routes.hpp"

namespace sandfort::api {

// What every named resource's JSON has: id, name, state, created_at, updated_at. A kind adds its
// own fields; nlohmann::json keeps an object's keys sorted, so the order they are set in is not
// the order they are written in.
template <typename View>
nlohmann::json named_json(const View& v) {
  return {{"id", v.id}, {"name", v.name}, {"state", v.state}, {"created_at", v.created_at}, {"updated_at", v.updated_at}};
}

// A field of a create's body: its key and the request's member it is read into.
template <typename Create, typename T>
struct body_field {
  const char* key;
  T Create::*member;
};

// A create's body: an object of the kind's fields only, each read into the request; an unknown
// field's error names the known ones in the kind's order, a wrongly typed one's the first such.
template <typename Kind>
result<typename Kind::create> parse_named_create(const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  std::string known;
  std::apply([&](const auto&... f) { ((known += (known.empty() ? "" : ", ") + std::string(f.key)), ...); },
             Kind::fields);
  for (const auto& [key, unused] : body->items())
    if (!std::apply([&](const auto&... f) { return ((key == f.key) || ...); }, Kind::fields))
      return make_error(errc::invalid_argument, "field '" + key + "' is not known (" + known + ")");
  typename Kind::create c;
  result<void> read_all;  // each field in turn, up to the first wrongly typed one
  std::apply([&](const auto&... f) { (void)(... && (read_all = read(*body, f.key, c.*f.member)).ok()); }, Kind::fields);
  if (!read_all) return std::move(read_all).err();
  return c;
}

template <typename Kind>
std::vector<api_route> named_resource_routes() {
  using auth::permission;
  using boost::asio::awaitable;
  const std::string collection = Kind::collection;
  return {
      {http::verb::post, collection, permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto req = parse_named_create<Kind>(ctx.req);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await Kind::backend(deps).create(p.org_id, *req, who);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(201, Kind::to_json(*r));
       }},
      {http::verb::get, collection, permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto req = parse_name_page(ctx);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         auto r = Kind::backend(deps).list(p.org_id, *req);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         nlohmann::json items = nlohmann::json::array();
         for (const auto& v : r->items) items.push_back(Kind::to_json(v));
         co_return http::json_response(
             200, nlohmann::json{{"items", items},
                                 {"next_cursor", r->next_cursor.empty() ? nlohmann::json(nullptr)
                                                                        : nlohmann::json(r->next_cursor)}});
       }},
      {http::verb::get, collection + "/{name}", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto r = Kind::backend(deps).get(p.org_id, ctx.params["name"]);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, Kind::to_json(*r));
       }},
      {http::verb::delete_, collection + "/{name}", permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto name = ctx.params["name"];
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await Kind::backend(deps).remove(p.org_id, name, who);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::empty_response(204);
       }},
  };
}

}  // namespace sandfort::api
