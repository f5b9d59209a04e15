#include "sandfort/api/api.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <spdlog/spdlog.h>

#include "routes.hpp"

namespace sandfort::api {

namespace {

// Every authenticated request takes a token from its principal's bucket and from its
// organization's, whatever it asks for (a key hammering routes it may not use is load all the same).
std::optional<error> over_rate_limit(dependencies& deps, const auth::principal& p, const std::string& remote) {
  const rate_limit& limit = deps.limiter.limit_for(p);
  const rate_limit& org_limit = deps.limiter.org_limit_for(p);
  if (limit.rate_per_s <= 0 && org_limit.rate_per_s <= 0) return std::nullopt;
  const std::string name = actor_of(p, "", remote).name;
  auto decided = deps.limiter.admit(name, limit, "org:" + p.org_id, org_limit);
  if (decided.allowed) return std::nullopt;
  const rate_limit& empty = decided.by_org ? org_limit : limit;
  deps.rate_refusals.note({p.org_id, name, remote, empty, decided.by_org});
  const std::string whose = decided.by_org ? "organization (all its keys and users together)"
                            : p.via == auth::method::oidc ? "identity"
                                                          : "API key";
  error e = make_error(errc::rate_limited,
                       fmt::format("rate limit of this {} exceeded ({:g} requests per second, bursts of {}); retry "
                                   "in {} s",
                                   whose, empty.rate_per_s, empty.burst, decided.retry_after_s));
  e.retry_after_s = decided.retry_after_s;
  return e;
}

}  // namespace

boost::asio::awaitable<result<auth::principal>> authorize(dependencies& deps, std::string bearer,
                                                         auth::permission needs, std::string request_id,
                                                         std::string remote) {
  auto who = co_await deps.authn.authenticate(std::move(bearer), std::move(request_id));
  if (!who) {
    if (who.err().code == errc::unauthenticated) deps.auth_failures.note(remote, who.err().message);
    co_return who;
  }
  if (auto refused = over_rate_limit(deps, *who, remote)) co_return std::move(*refused);
  if (!auth::allows(who->granted, who->superadmin, needs))
    co_return make_error(errc::permission_denied, "role " + auth::to_string(who->granted) + " may not do this");
  co_return who;
}

result<void> admit_on_state_disk(dependencies& deps, http::verb method, std::string_view route) {
  const bool acts = (method != http::verb::get && method != http::verb::head) || route.ends_with("/pty");
  if (!acts) return {};
  const bool relieves = method == http::verb::delete_ || route.ends_with("/stop") || route.ends_with("/stop-all") ||
                        route.ends_with("/disable");
  return deps.db.admit(relieves ? store::write_kind::relief : store::write_kind::change);
}

audit::actor actor_of(const auth::principal& p, const std::string& request_id, const std::string& remote) {
  std::string name = p.via == auth::method::oidc ? "oidc:" + p.id + "@" + p.issuer : "key:" + p.id;
  return {std::move(name), request_id, remote};
}

namespace {

std::string header(const http::request& req, http::bhttp::field f) {
  auto it = req.find(f);
  return it == req.end() ? std::string() : std::string(it->value());
}

// Authentication, then the role check, then the route.
http::handler guard(std::shared_ptr<dependencies> deps, api_route r) {
  return [deps, r = std::move(r)](http::context& ctx) -> boost::asio::awaitable<http::response> {
    ctx.attributes["route"] = r.pattern;  // the request metrics' label
    if (!r.needs) {
      // Named, not a temporary: GCC 12 mishandles temporaries inside co_await expressions.
      const auth::principal anonymous;
      co_return co_await r.fn(ctx, anonymous);
    }
    auto who = co_await authorize(*deps, header(ctx.req, http::bhttp::field::authorization), *r.needs, ctx.request_id,
                                    ctx.remote);
    if (who) {
      if (auto room = admit_on_state_disk(*deps, r.method, r.pattern); !room) who = std::move(room).err();
    }
    if (!who) {
      auto res = http::error_response(who.err(), ctx.request_id);
      if (who.err().code == errc::unauthenticated) res.set(http::bhttp::field::www_authenticate, "Bearer");
      co_return res;
    }
    ctx.attributes["org"] = who->org_id;
    // As the audit chain names them: a key by its id, an identity provider's user as sub@issuer.
    ctx.attributes["principal"] = actor_of(*who, ctx.request_id, ctx.remote).name;
    co_return co_await r.fn(ctx, *who);
  };
}

}  // namespace

http::handler make_handler(dependencies d) {
  auto deps = std::make_shared<dependencies>(d);
  auto routes = std::make_shared<http::router>();
  for (auto make : {health_routes, identity_routes, sandbox_routes, audit_routes, guardrail_routes, volume_routes, snapshot_routes, pool_routes, metrics_routes})
    for (auto& r : make(*deps)) routes->add(http::route{r.method, r.pattern, guard(deps, r)});

  return [routes](http::context& ctx) -> boost::asio::awaitable<http::response> {
    auto started = std::chrono::steady_clock::now();
    auto res = co_await routes->dispatch(ctx);
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    spdlog::info("{} {} {} {:.1f}ms org={} principal={} id={}", std::string(ctx.req.method_string()), ctx.path,
                 res.result_int(), ms, ctx.attributes["org"], ctx.attributes["principal"], ctx.request_id);
    // No route: 404 or 405, all under one label whatever the path was.
    auto route = ctx.attributes.find("route");
    observe_request(route == ctx.attributes.end() ? "unmatched" : route->second, ctx.req.method(), res.result_int(),
                    ms / 1000);
    co_return res;
  };
}

}  // namespace sandfort::api
