// Liveness and readiness: no authentication, so load balancers and orchestrators can ask.
// /healthz also says which version answers (the same as `sandfortd version` and `sandfort --version`).
#include "routes.hpp"
#include "sandfort/version.hpp"

namespace sandfort::api {

std::vector<api_route> health_routes(dependencies& deps) {
  return {
      {http::verb::get, "/healthz", std::nullopt,
       [](http::context&, const auth::principal&) -> boost::asio::awaitable<http::response> {
         co_return http::json_response(200, {{"status", "ok"}, {"version", sandfort::version}});
       }},
      {http::verb::get, "/readyz", std::nullopt,
       [&deps](http::context& ctx, const auth::principal&) -> boost::asio::awaitable<http::response> {
         auto r = co_await deps.sandboxes.ready();
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, {{"status", "ready"}});
       }},
  };
}

}  // namespace sandfort::api
