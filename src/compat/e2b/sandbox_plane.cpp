// E2B's sandbox plane under /e2b-sandbox: what the SDK sends to envd (port 49983) and to the code
// interpreter (port 49999) of a sandbox, named by the E2b-Sandbox-Id and E2b-Sandbox-Port headers.
// Its credential is the sandbox's access token (X-Access-Token), minted by create or connect; no
// API key reaches this plane. A token opens its own sandbox and nothing else: another sandbox's
// id, a deleted sandbox, a wrong or missing token are all the same 401. Port 49999's code
// interpreter (/execute, /contexts) is interpreter.cpp's.
#include <chrono>

#include "wire.hpp"

namespace sandfort::compat::e2b {

// The code interpreter's door (port 49999) serves /execute, /contexts and /health
// (interpreter.cpp); envd's paths are not there.
http::response interpreter_not_served() {
  return http::json_response(404, {{"code", 404},
                                   {"message", "port 49999 (the code interpreter) serves /execute, /contexts and "
                                               "/health only (docs/e2b.md)"}});
}

namespace {

http::response wrong_port(const sandbox_call& call) {
  return http::json_response(
      502, {{"code", 502}, {"message", "port " + call.port + " of this sandbox is not served through /e2b-sandbox"}});
}

// GET /health: 204 while the sandbox runs, 502 otherwise (the SDK's "not running").
awaitable<http::response> health(dependencies& deps, http::context& ctx, const auth::principal&) {
  auto call = authorize(deps, ctx.req);
  if (!call) co_return refuse_call(call.err(), ctx.request_id);
  if (call->port != envd_port && call->port != interpreter_port) co_return wrong_port(*call);
  auto v = co_await deps.sandboxes.get(call->org_id, call->sandbox_id, "", std::chrono::seconds(0));
  if (!v) co_return connect_error(v.err(), ctx.request_id);
  if (v->state != "started") co_return not_running("sandbox is " + v->state);
  co_return http::empty_response(204);
}

// Connect RPCs (process.Process, filesystem.Filesystem) not served yet: Connect's unimplemented.
awaitable<http::response> rpc_not_served(dependencies& deps, http::context& ctx, const auth::principal&) {
  auto call = authorize(deps, ctx.req);
  if (!call) co_return refuse_call(call.err(), ctx.request_id);
  if (call->port == interpreter_port) co_return interpreter_not_served();
  co_return http::json_response(501, {{"code", "unimplemented"},
                                      {"message", ctx.params["service"] + "/" + ctx.params["method"] +
                                                      " is not served by Sandfort's E2B-compatible API yet"}});
}

api::api_route plane_route(http::verb m, std::string pattern, api::buffered_handler h) {
  // No API key here: each handler authorizes the access token first (authorize()).
  api::api_route r{m, std::move(pattern), std::nullopt, std::move(h)};
  r.dialect = sandbox_dialect();
  return r;
}

}  // namespace

std::vector<api::api_route> sandbox_plane_routes() {
  using http::verb;
  return {
      plane_route(verb::get, "/e2b-sandbox/health", health),
      plane_route(verb::post, "/e2b-sandbox/{service}/{method}", rpc_not_served),
  };
}

namespace {
std::vector<api::api_route> all_routes() {
  auto all = control_routes();
  for (auto& r : process_routes()) all.push_back(std::move(r));
  for (auto& r : watch_routes()) all.push_back(std::move(r));  // before filesystem's {method}
  for (auto& r : filesystem_routes()) all.push_back(std::move(r));
  for (auto& r : interpreter_routes()) all.push_back(std::move(r));
  for (auto& r : transfer_routes()) all.push_back(std::move(r));
  for (auto& r : sandbox_plane_routes()) all.push_back(std::move(r));
  return all;
}
}  // namespace

void register_routes(token_backend* t) {
  set_tokens(t);
  api::add_route_table(all_routes);
}

}  // namespace sandfort::compat::e2b
