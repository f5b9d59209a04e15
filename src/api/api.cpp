#include "sandfort/api/api.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <spdlog/spdlog.h>

#include "console_csrf.hpp"
#include "console_pages.hpp"
#include "routes.hpp"
#include "sandfort/auth/console_sessions.hpp"

namespace sandfort::api {

namespace asio = boost::asio;

std::string to_string(route_kind k) {
  switch (k) {
    case route_kind::buffered: return "buffered";
    case route_kind::streamed: return "streamed";
    case route_kind::forwarded: return "forwarded";
  }
  return "?";
}

namespace {
std::vector<std::vector<api_route> (*)()>& added_tables() {
  static std::vector<std::vector<api_route> (*)()> tables;
  return tables;
}
}  // namespace

void add_route_table(std::vector<api_route> (*table)()) {
  for (auto t : added_tables())
    if (t == table) return;
  added_tables().push_back(table);
}

std::vector<api_route> route_registry() {
  std::vector<api_route> all;
  for (auto table : {health_routes, identity_routes, console_routes, sandbox_routes, stream_routes, audit_routes, event_routes,
                     guardrail_routes, volume_routes, snapshot_routes, pool_routes, metrics_routes, secret_routes, webhook_routes})
    for (auto& r : table()) all.push_back(std::move(r));
  for (auto table : added_tables())
    for (auto& r : table()) all.push_back(std::move(r));
  return all;
}

namespace {

const char* permission_name(auth::permission p) {
  switch (p) {
    case auth::permission::read: return "read";
    case auth::permission::use_sandboxes: return "use_sandboxes";
    case auth::permission::manage_org: return "manage_org";
    case auth::permission::superadmin: return "superadmin";
  }
  return "?";
}

// The least role that holds a permission, as docs/api.md's role table names it.
std::string least_role(std::optional<auth::permission> p) {
  if (!p) return "none";
  for (auto r : {auth::role::viewer, auth::role::member, auth::role::admin})
    if (auth::allows(r, false, *p)) return auth::to_string(r);
  return "superadmin";
}

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
  deps.gate.note_rate_refusal({p.org_id, name, remote, empty, decided.by_org});
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

nlohmann::json describe_routes() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : route_registry())
    out.push_back({{"method", std::string(http::bhttp::to_string(r.method))},
                   {"pattern", r.pattern},
                   {"permission", r.needs ? nlohmann::json(permission_name(*r.needs)) : nlohmann::json(nullptr)},
                   {"role", least_role(r.needs)},
                   {"kind", to_string(r.kind)}});
  return out;
}

result<void> permits(const api_route& r, const auth::principal& who) {
  if (!r.needs || auth::allows(who.granted, who.superadmin, *r.needs)) return {};
  return make_error(errc::permission_denied, "role " + auth::to_string(who.granted) + " may not do this");
}

asio::awaitable<result<auth::principal>> guard(dependencies& deps, const api_route& r, std::string bearer,
                                               const http::bhttp::fields& headers, std::string request_id,
                                               std::string remote) {
  if (!r.needs) co_return auth::principal{};
  auto who = co_await deps.gate.authenticate(std::move(bearer), std::move(request_id));
  if (!who) {
    if (who.err().code == errc::unauthenticated) deps.gate.note_auth_failure(remote, who.err().message);
    co_return who;
  }
  if (auto refused = over_rate_limit(deps, *who, remote)) co_return std::move(*refused);
  if (auto allowed = permits(r, *who); !allowed) co_return std::move(allowed).err();
  if (!who->console_session.empty())
    if (auto sent_by_console = console_request_allowed(r.method, headers, who->console_csrf); !sent_by_console)
      co_return std::move(sent_by_console).err();
  if (auto room = admit_on_state_disk(deps, r.method, r.pattern); !room) co_return std::move(room).err();
  co_return who;
}

result<void> admit_on_state_disk(dependencies& deps, http::verb method, std::string_view route) {
  const bool acts = (method != http::verb::get && method != http::verb::head) || route.ends_with("/pty");
  if (!acts) return {};
  const bool relieves = method == http::verb::delete_ || route.ends_with("/stop") || route.ends_with("/stop-all") ||
                        route.ends_with("/disable");
  return deps.gate.admit_write(relieves);
}

audit::actor actor_of(const auth::principal& p, const std::string& request_id, const std::string& remote) {
  std::string name = p.via == auth::method::oidc ? "oidc:" + p.id + "@" + p.issuer : "key:" + p.id;
  return {std::move(name), request_id, remote};
}

namespace {

std::string field(const http::bhttp::fields& h, http::bhttp::field f) {
  auto it = h.find(f);
  return it == h.end() ? std::string() : std::string(it->value());
}

// The console's session cookie as the authenticator takes it ("Console <value>"), or empty.
std::string console_credential(const http::bhttp::fields& h) {
  std::string cookie = auth::console_cookie_of(field(h, http::bhttp::field::cookie));
  return cookie.empty() ? std::string() : std::string(auth::console_scheme) + cookie;
}

// The Authorization value the guard is given: the header itself (else the console's cookie), or a
// dialect's key header as a bearer.
std::string credential_of(const http::bhttp::fields& h, const api_route& r) {
  if (!r.dialect) {
    std::string authorization = field(h, http::bhttp::field::authorization);
    return authorization.empty() ? console_credential(h) : authorization;
  }
  if (r.dialect->key_header.empty()) return field(h, http::bhttp::field::authorization);
  auto it = h.find(r.dialect->key_header);
  return it == h.end() ? std::string() : "Bearer " + std::string(it->value());
}

// A buffered route behind the guard.
http::handler buffered(std::shared_ptr<dependencies> deps, api_route r) {
  return [deps, r = std::move(r)](http::context& ctx) -> asio::awaitable<http::response> {
    ctx.attributes["route"] = r.pattern;  // the request metrics' label
    auto who = co_await guard(*deps, r, credential_of(ctx.req, r), ctx.req, ctx.request_id, ctx.remote);
    if (!who) {
      if (r.dialect) co_return r.dialect->refuse(who.err(), ctx.request_id);
      auto res = http::error_response(who.err(), ctx.request_id);
      if (who.err().code == errc::unauthenticated) res.set(http::bhttp::field::www_authenticate, "Bearer");
      co_return res;
    }
    if (r.needs) {
      ctx.attributes["org"] = who->org_id;
      // As the audit chain names them: a key by its id, an identity provider's user as sub@issuer.
      ctx.attributes["principal"] = actor_of(*who, ctx.request_id, ctx.remote).name;
    }
    co_return co_await r.answer(*deps, ctx, *who);
  };
}

// Browsers cannot set headers on a WebSocket: they offer `bearer.<token>` as a subprotocol
// or put it in ?access_token=. Returns the Authorization value and the subprotocol to echo.
std::pair<std::string, std::string> credentials(const http::exchange& ex) {
  const auto& h = ex.parser.get();
  if (auto auth = field(h, http::bhttp::field::authorization); !auth.empty()) return {auth, ""};
  std::string offered = field(h, http::bhttp::field::sec_websocket_protocol);
  for (std::size_t start = 0; start < offered.size();) {
    auto comma = offered.find(',', start);
    std::string one = offered.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    one.erase(0, one.find_first_not_of(' '));
    one.erase(one.find_last_not_of(' ') + 1);
    if (one.rfind("bearer.", 0) == 0) return {"Bearer " + one.substr(7), one};
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (auto it = ex.query.find("access_token"); it != ex.query.end()) return {"Bearer " + it->second, ""};
  return {console_credential(h), ""};
}

void log_exchange(const http::exchange& ex, const std::string& org, unsigned status_hint,
                  std::chrono::steady_clock::time_point started) {
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  spdlog::info("{} {} stream {:.1f}ms org={} id={}{}", std::string(ex.parser.get().method_string()), ex.path, ms, org,
               ex.request_id, status_hint ? " status=" + std::to_string(status_hint) : "");
}

// A streamed or forwarded route behind the guard, timed and counted under its pattern
// (observe_request). Its handler writes the answer itself and notes the status it gave.
http::stream_handler streamed(std::shared_ptr<dependencies> deps, api_route r) {
  return [deps, r = std::move(r)](http::exchange& ex) -> asio::awaitable<bool> {
    struct done {  // also when the handler throws
      const api_route& r;
      unsigned status = 0;
      std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
      ~done() {
        observe_request(r.pattern, r.method, status,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
    } on_end{r};
    auto [bearer, subprotocol] = credentials(ex);
    if (r.dialect) bearer = credential_of(ex.parser.get(), r);
    auto who = co_await guard(*deps, r, bearer, ex.parser.get(), ex.request_id, ex.remote);
    if (!who) {
      on_end.status = static_cast<unsigned>(http_status(who.err().code));
      log_exchange(ex, "", on_end.status, on_end.started);
      if (r.dialect) co_return co_await http::respond(ex, r.dialect->refuse(who.err(), ex.request_id));
      co_return co_await http::respond_error(ex, who.err());
    }
    stream_call call{*who, subprotocol, on_end.status};
    bool keep = false;
    try {
      keep = co_await r.stream(*deps, ex, call);
    } catch (const std::exception& e) {
      // The server closes the connection; the reason is said here, where the route is known.
      spdlog::error("{} {} stream failed: {} (route {}, org={} id={})", std::string(ex.parser.get().method_string()),
                    ex.path, e.what(), r.pattern, who->org_id, ex.request_id);
      throw;
    }
    log_exchange(ex, who->org_id, 0, on_end.started);
    co_return keep;
  };
}

}  // namespace

http::handler make_handler(dependencies d) {
  register_metrics();
  auto deps = std::make_shared<dependencies>(d);
  auto routes = std::make_shared<http::router>();
  for (auto& r : route_registry())
    if (r.kind == route_kind::buffered) routes->add(http::route{r.method, r.pattern, buffered(deps, std::move(r))});

  return [routes](http::context& ctx) -> asio::awaitable<http::response> {
    auto started = std::chrono::steady_clock::now();
    // The console's files are logged and counted as every answer is, under one label.
    http::response res;
    if (auto page = console_page(ctx)) {
      ctx.attributes["route"] = "/console";
      res = std::move(*page);
    } else {
      res = co_await routes->dispatch(ctx);
    }
    // A JSON answer, or a file's bytes, never runs as a script in a page that loads it with the
    // console's cookie (docs/console.md).
    res.set("X-Content-Type-Options", "nosniff");
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

http::stream_selector make_stream_selector(dependencies d) {
  auto deps = std::make_shared<dependencies>(d);
  std::vector<http::stream_route> routes;
  for (auto& r : route_registry())
    if (r.kind != route_kind::buffered) routes.push_back({r.method, r.pattern, streamed(deps, std::move(r))});
  return http::make_stream_selector(std::move(routes));
}

}  // namespace sandfort::api
