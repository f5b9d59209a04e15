// Liveness, readiness and the API's own description: no authentication, so load balancers,
// orchestrators and API tooling can ask. /healthz also says which version answers (the same as
// `sandfortd version` and `sandfort --version`).
#include "openapi_document.hpp"
#include "routes.hpp"
#include "sandfort/version.hpp"

namespace sandfort::api {

namespace {

http::response document(std::string_view body, const char* content_type) {
  http::response res{boost::beast::http::status::ok, 11};
  res.set(boost::beast::http::field::content_type, content_type);
  res.body() = std::string(body);
  res.prepare_payload();
  return res;
}

}  // namespace

std::vector<api_route> health_routes() {
  return {
      {http::verb::get, "/healthz", std::nullopt,
       [](dependencies&, http::context&, const auth::principal&) -> boost::asio::awaitable<http::response> {
         co_return http::json_response(200, {{"status", "ok"}, {"version", sandfort::version}});
       }},
      {http::verb::get, "/readyz", std::nullopt,
       [](dependencies& deps, http::context& ctx, const auth::principal&) -> boost::asio::awaitable<http::response> {
         auto r = co_await deps.daemon.ready();
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, {{"status", "ready"}});
       }},
      // docs/openapi.yaml of the commit this daemon was built from.
      {http::verb::get, "/v1/openapi.json", std::nullopt,
       [](dependencies&, http::context&, const auth::principal&) -> boost::asio::awaitable<http::response> {
         co_return document(openapi_json(), "application/json");
       }},
      {http::verb::get, "/v1/openapi.yaml", std::nullopt,
       [](dependencies&, http::context&, const auth::principal&) -> boost::asio::awaitable<http::response> {
         co_return document(openapi_yaml(), "application/yaml");
       }},
  };
}

}  // namespace sandfort::api
