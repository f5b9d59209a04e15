// The console's sign-in (docs/console.md): an API key exchanged for a session cookie, or a sign-in
// through an identity provider (the authorization code flow: start, the provider, callback), the
// session read back when a page loads, and signing out. The cookie stands for the key, or for the
// principal the provider proved, on every other route (api.cpp's guard), never in place of its
// role: a viewer's session reads, as the viewer's key does.
#include <algorithm>

#include "routes.hpp"
#include "sandfort/auth/code_flow.hpp"
#include "sandfort/auth/console_login.hpp"
#include "sandfort/auth/console_sessions.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/http/admission.hpp"

namespace sandfort::api {

using nlohmann::json;
using boost::asio::awaitable;

namespace {

// HttpOnly: no script reads it. Path=/ and no Domain: this host only, not a preview's subdomain.
// Secure (and then the __Host- name, which the browser holds to all of these) when sandfortd serves
// TLS itself.
std::string host_cookie(const config& cfg, const char* plain_name, const char* secure_name, const std::string& value,
                        long long max_age_s, const char* same_site) {
  const bool secure = cfg.tls.enabled();
  std::string c = std::string(secure ? secure_name : plain_name) + "=" + value + "; Path=/; HttpOnly; SameSite=" +
                  same_site + "; Max-Age=" + std::to_string(std::max(0LL, max_age_s));
  if (secure) c += "; Secure";
  return c;
}

// SameSite=Strict: no other site's page sends it.
std::string session_cookie(const config& cfg, const std::string& value, long long max_age_s) {
  return host_cookie(cfg, auth::console_cookie, auth::console_cookie_secure, value, max_age_s, "Strict");
}

// The pre-login cookie ties the provider's redirect back to the browser that left: Lax, since that
// redirect is a navigation from another site, which a Strict cookie would not come back with.
std::string login_cookie(const config& cfg, const std::string& value, long long max_age_s) {
  return host_cookie(cfg, http::console_login_cookie, http::console_login_cookie_secure, value, max_age_s, "Lax");
}

std::string login_cookie_of(const http::request& req) {
  auto it = req.find(http::bhttp::field::cookie);
  if (it == req.end()) return {};
  // The Secure name wins: a cookie set by plain HTTP on the same host cannot shadow it.
  for (const char* name : {http::console_login_cookie_secure, http::console_login_cookie})
    if (auto values = http::take_cookie(it->value(), name).values; !values.empty()) return values.front();
  return {};
}

std::string query_value(const http::context& ctx, const char* name) {
  auto it = ctx.query.find(name);
  return it == ctx.query.end() ? std::string() : it->second;
}

// A redirect of the sign-in: never cached, and the URL it came from (a code, a state) never sent on.
http::response sign_in_redirect(const std::string& location) {
  auto res = http::empty_response(302);
  res.set(http::bhttp::field::location, location);
  res.set(http::bhttp::field::cache_control, "no-store");
  res.set("Referrer-Policy", "no-referrer");
  return res;
}

// Back to the console's sign-in page with a short reason it explains; never the provider's words.
http::response sign_in_failed(const error& e) {
  const std::string code = auth::is_login_error(e.message) ? e.message : auth::login_error::internal;
  return sign_in_redirect("/console/#/signin?error=" + code);
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
      // Sign-in through an identity provider: public routes (nobody is signed in yet). Which
      // issuers offer it, by a key and a label; nothing of their configuration beyond that.
      {http::verb::get, "/v1/console/oidc/issuers", std::nullopt,
       [](dependencies& deps, http::context&, const auth::principal&) -> awaitable<http::response> {
         json items = json::array();
         for (const auto& is : deps.identity.console_issuers()) items.push_back({{"id", is.id}, {"name", is.name}});
         co_return http::json_response(200, json{{"items", items}});
       }},
      // To the provider, with a new pre-login cookie. The callback is on the origin the browser
      // used (or console.public_url): the pre-login cookie must come back to the host that set it.
      {http::verb::get, "/v1/console/oidc/start", std::nullopt,
       [](dependencies& deps, http::context& ctx, const auth::principal&) -> awaitable<http::response> {
         const std::string issuer = query_value(ctx, "issuer");
         if (issuer.empty())
           co_return http::error_response(
               invalid_argument("issuer is required: one of the ids GET /v1/console/oidc/issuers lists"),
               ctx.request_id);
         auto host = ctx.req[http::bhttp::field::host];
         auto origin = auth::code_flow::console_origin(deps.cfg.console.public_url,
                                                       std::string_view(host.data(), host.size()), deps.cfg.tls.enabled());
         if (!origin) co_return http::error_response(origin.err(), ctx.request_id);
         const std::string redirect_uri = *origin + std::string(auth::code_flow::callback_path);
         // Counted per address, an IPv6 one by its /64 (one subscriber's allocation), as the
         // listener counts connections.
         const std::string source = http::source_key(ctx.remote);
         auto begun = co_await deps.identity.start_console_login(issuer, redirect_uri, source, ctx.request_id);
         if (!begun) {
           if (begun.err().code == errc::invalid_argument)
             co_return http::error_response(begun.err(), ctx.request_id);
           co_return sign_in_failed(begun.err());
         }
         auto res = sign_in_redirect(begun->location);
         res.set(http::bhttp::field::set_cookie, login_cookie(deps.cfg, begun->browser_secret, 300));
         co_return res;
       }},
      // Where the provider sends the browser back. Always a redirect to the console: signed in, or
      // to the sign-in page with a short reason; the pre-login cookie is cleared either way.
      {http::verb::get, "/v1/console/oidc/callback", std::nullopt,
       [](dependencies& deps, http::context& ctx, const auth::principal&) -> awaitable<http::response> {
         auth::login_callback cb{query_value(ctx, "state"), query_value(ctx, "code"), query_value(ctx, "error"),
                                 query_value(ctx, "iss"), login_cookie_of(ctx.req)};
         auto proven = co_await deps.identity.finish_console_login(cb, ctx.request_id);
         auto ended = [&](http::response res) {
           res.insert(http::bhttp::field::set_cookie, login_cookie(deps.cfg, "", 0));
           return res;
         };
         if (!proven) {
           if (proven.err().message == auth::login_error::token_refused)
             deps.gate.note_auth_failure(ctx.remote, "console sign-in: the identity provider's tokens were refused");
           co_return ended(sign_in_failed(proven.err()));
         }
         const audit::actor who = actor_of(proven->who, ctx.request_id, ctx.remote);
         ctx.attributes["org"] = proven->who.org_id;
         ctx.attributes["principal"] = who.name;
         auto grant = deps.identity.open_identity_console_session(*proven, who);
         if (!grant) {
           const char* code = grant.err().code == errc::permission_denied ? auth::login_error::no_access
                                                                          : auth::login_error::internal;
           co_return ended(sign_in_failed(make_error(grant.err().code, code)));
         }
         auto res = ended(sign_in_redirect("/console/"));
         res.insert(http::bhttp::field::set_cookie,
                    session_cookie(deps.cfg, grant->cookie, seconds_until(grant->expires_at)));
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
