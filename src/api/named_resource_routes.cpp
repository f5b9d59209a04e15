// An organization's volumes and snapshots: the same four routes each — create, list by name, get,
// delete — written once over their one backend template (named_resource_backend). A kind is data:
// its collection's path, its backend, the fields a create's body may have (in the order an
// unknown field's error names them), and the fields its JSON has besides those of every named
// resource.
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "json_body.hpp"
#include "routes.hpp"

namespace sandfort::api {

namespace {

// A field of a create's body (the request's member it is read into) or of a resource's JSON
// (the view's member it is written from).
template <typename Struct, typename T>
struct resource_field {
  const char* key;
  T Struct::*member;
};
// Spelled out: Clang 14 (Debian's) deduces no aggregate's template arguments.
template <typename Struct, typename T>
resource_field(const char*, T Struct::*) -> resource_field<Struct, T>;
template <typename Struct, typename T>
Struct struct_of(const resource_field<Struct, T>&);  // declared only: the type a field belongs to

template <typename T>
nlohmann::json field_json(const T& v) {
  return v;
}
template <typename T>
nlohmann::json field_json(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

using sandbox::snapshot_create_request;
using sandbox::snapshot_view;
using sandbox::volume_create_request;
using sandbox::volume_view;

struct volumes_api {
  static constexpr const char* collection = "/v1/volumes";
  static volume_backend& backend(dependencies& deps) { return deps.volumes; }
  static constexpr std::tuple body{resource_field{"name", &volume_create_request::name},
                                   resource_field{"size_mb", &volume_create_request::size_mb}};
  static constexpr std::tuple view{resource_field{"size_mb", &volume_view::size_mb}};
};

struct snapshots_api {
  static constexpr const char* collection = "/v1/snapshots";
  static snapshot_backend& backend(dependencies& deps) { return deps.snapshots; }
  static constexpr std::tuple body{resource_field{"sandbox_id", &snapshot_create_request::sandbox_id},
                                   resource_field{"name", &snapshot_create_request::name}};
  static constexpr std::tuple view{resource_field{"size_bytes", &snapshot_view::size_bytes},
                                   resource_field{"source_sandbox_id", &snapshot_view::source_sandbox_id}};
};

// id, name, state, created_at, updated_at, then the kind's own. nlohmann::json keeps an object's
// keys sorted: the order they are set in is not the order they are written in.
template <typename Kind, typename View>
nlohmann::json resource_json(const View& v) {
  nlohmann::json j{
      {"id", v.id}, {"name", v.name}, {"state", v.state}, {"created_at", v.created_at}, {"updated_at", v.updated_at}};
  std::apply([&](const auto&... f) { ((j[f.key] = field_json(v.*f.member)), ...); }, Kind::view);
  return j;
}

// A create's body: an object of the kind's fields only, each read into the request; of several
// wrongly typed fields, the first the kind lists is named.
template <typename Kind>
using create_of = decltype(struct_of(std::get<0>(Kind::body)));  // the kind's create request

template <typename Kind>
result<create_of<Kind>> parse_resource_create(const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  std::string known;
  std::apply([&](const auto&... f) { ((known += (known.empty() ? "" : ", ") + std::string(f.key)), ...); },
             Kind::body);
  for (const auto& item : body->items()) {
    const std::string& key = item.key();  // not a structured binding: Clang 14 cannot capture one
    if (!std::apply([&](const auto&... f) { return ((key == f.key) || ...); }, Kind::body))
      return make_error(errc::invalid_argument, "field '" + key + "' is not known (" + known + ")");
  }
  create_of<Kind> c;
  result<void> read_all;  // each field in turn, up to the first wrongly typed one
  std::apply([&](const auto&... f) { (void)(... && (read_all = read(*body, f.key, c.*f.member)).ok()); }, Kind::body);
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
         auto req = parse_resource_create<Kind>(ctx.req);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await Kind::backend(deps).create(p.org_id, *req, who);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(201, resource_json<Kind>(*r));
       }},
      {http::verb::get, collection, permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto req = parse_name_page(ctx);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         auto r = Kind::backend(deps).list(p.org_id, *req);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         nlohmann::json items = nlohmann::json::array();
         for (const auto& v : r->items) items.push_back(resource_json<Kind>(v));
         const auto next = r->next_cursor.empty() ? nlohmann::json(nullptr) : nlohmann::json(r->next_cursor);
         co_return http::json_response(200, nlohmann::json{{"items", items}, {"next_cursor", next}});
       }},
      {http::verb::get, collection + "/{name}", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto r = Kind::backend(deps).get(p.org_id, ctx.params["name"]);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, resource_json<Kind>(*r));
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

}  // namespace

std::vector<api_route> volume_routes() { return named_resource_routes<volumes_api>(); }
std::vector<api_route> snapshot_routes() { return named_resource_routes<snapshots_api>(); }

}  // namespace sandfort::api
