#include "sandfort/api/api.hpp"

#include <chrono>
#include <memory>
#include <spdlog/spdlog.h>

#include "routes.hpp"

namespace sandfort::api {

result<auth::principal> authorize(dependencies& deps, const std::string& bearer, auth::permission needs) {
  auto who = auth::authenticate(deps.db, deps.clk, bearer);
  if (!who) return who;
  if (!auth::allows(who->key_role, who->superadmin, needs))
    return make_error(errc::permission_denied, "role " + auth::to_string(who->key_role) + " may not do this");
  return who;
}

namespace {

std::string header(const http::request& req, http::bhttp::field f) {
  auto it = req.find(f);
  return it == req.end() ? std::string() : std::string(it->value());
}

// Authentication, then the role check, then the route.
http::handler guard(std::shared_ptr<dependencies> deps, api_route r) {
  return [deps, r = std::move(r)](http::context& ctx) -> boost::asio::awaitable<http::response> {
    if (!r.needs) {
      // Named, not a temporary: GCC 12 mishandles temporaries inside co_await expressions.
      const auth::principal anonymous;
      co_return co_await r.fn(ctx, anonymous);
    }
    auto who = authorize(*deps, header(ctx.req, http::bhttp::field::authorization), *r.needs);
    if (!who) {
      auto res = http::error_response(who.err(), ctx.request_id);
      if (who.err().code == errc::unauthenticated) res.set(http::bhttp::field::www_authenticate, "Bearer");
      co_return res;
    }
    ctx.attributes["org"] = who->org_id;
    co_return co_await r.fn(ctx, *who);
  };
}

}  // namespace

http::handler make_handler(dependencies d) {
  auto deps = std::make_shared<dependencies>(d);
  auto routes = std::make_shared<http::router>();
  for (auto make : {health_routes, identity_routes, sandbox_routes})
    for (auto& r : make(*deps)) routes->add(http::route{r.method, r.pattern, guard(deps, r)});

  return [routes](http::context& ctx) -> boost::asio::awaitable<http::response> {
    auto started = std::chrono::steady_clock::now();
    auto res = co_await routes->dispatch(ctx);
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    spdlog::info("{} {} {} {:.1f}ms org={} id={}", std::string(ctx.req.method_string()), ctx.path, res.result_int(),
                 ms, ctx.attributes["org"], ctx.request_id);
    co_return res;
  };
}

}  // namespace sandfort::api
