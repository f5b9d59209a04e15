// The console's sign-in (docs/console.md): an API key exchanged for a session cookie, the session
// read back when a page loads, and signing out. The cookie stands for the key on every other route
// (api.cpp's guard), never in place of its role: a viewer's session reads, as the viewer's key does.
#include <algorithm>

#include "routes.hpp"
#include "sandfort/auth/console_sessions.hpp"
#include "sandfort/core/clock.hpp"

namespace sandfort::api {

using nlohmann::json;
using boost::asio::awaitable;

namespace {

// HttpOnly: no script reads it. SameSite=Strict: no other site's page sends it. Path=/ and no
// Domain: this host only, not a preview's subdomain. Secure (and then the __Host- name, which the
// browser holds to all of these) when sandfortd serves TLS itself.
std::string session_cookie(const config& cfg, const std::string& value, long long max_age_s) {
  const bool secure = cfg.tls.enabled();
  std::string c = std::string(secure ? auth::console_cookie_secure : auth::console_cookie) + "=" + value +
                  "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" + std::to_string(std::max(0LL, max_age_s));
  if (secure) c += "; Secure";
  return c;
}

long long seconds_until(const std::string& when) {
  time_point t;
  if (!parse_time(when, t)) return 0;
  return std::chrono::duration_cast<std::chrono::seconds>(t - std::chrono::system_clock::now()).count();
}

http::response no_session(const http::context& ctx) {
  return http::error_response(
      make_error(errc::not_found, "no console session: this request came without the console's cookie"),
      ctx.request_id);
}

json session_json(const auth::principal& p, const std::string& csrf_token) {
  json j = whoami_json(p);
  j["csrf_token"] = csrf_token;
  return j;
}

}  // namespace

std::vector<api_route> console_routes() {
  using auth::permission;
  return {
      // The key comes as any API call's does (Authorization: Bearer sfk_…), so the one guard
      // authenticates it, rate-limits it and counts a refusal for the audit chain's auth.failures.
      {http::verb::post, "/v1/console/session", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto authorization = ctx.req[http::bhttp::field::authorization];
         auto bearer = auth::bearer_token(std::string(authorization.data(), authorization.size()));
         if (!p.console_session.empty() || p.via != auth::method::api_key || !bearer || !auth::is_api_key(*bearer))
           co_return http::error_response(
               make_error(errc::invalid_argument, "a console session is opened with an API key in the "
                                                  "Authorization header (Bearer sfk_…)"),
               ctx.request_id);
         auto grant = deps.identity.open_console_session(p, *bearer, actor_of(p, ctx.request_id, ctx.remote));
         if (!grant) co_return http::error_response(grant.err(), ctx.request_id);
         json j = session_json(p, grant->csrf_token);
         j["expires_at"] = grant->expires_at;
         auto res = http::json_response(201, j);
         res.set(http::bhttp::field::set_cookie,
                 session_cookie(deps.cfg, grant->cookie, seconds_until(grant->expires_at)));
         res.set(http::bhttp::field::cache_control, "no-store");
         co_return res;
       }},
      // What a console page loads with: who is signed in, and the token its changes carry.
      {http::verb::get, "/v1/console/session", permission::read,
       [](dependencies&, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         if (p.console_session.empty()) co_return no_session(ctx);
         auto res = http::json_response(200, session_json(p, p.console_csrf));
         res.set(http::bhttp::field::cache_control, "no-store");
         co_return res;
       }},
      {http::verb::delete_, "/v1/console/session", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         if (p.console_session.empty()) co_return no_session(ctx);
         if (auto r = deps.identity.close_console_session(p, actor_of(p, ctx.request_id, ctx.remote)); !r)
           co_return http::error_response(r.err(), ctx.request_id);
         auto res = http::empty_response(204);
         res.set(http::bhttp::field::set_cookie, session_cookie(deps.cfg, "", 0));
         co_return res;
       }},
  };
}

}  // namespace sandfort::api
