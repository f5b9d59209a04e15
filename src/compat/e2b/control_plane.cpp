// E2B's REST control plane under /e2b, over the API's sandbox backend: the same calls the native
// /v1/sandboxes routes make, so keys, roles, quotas, the kill switch and the audit chain apply.
#include <algorithm>
#include <chrono>

#include "json_body.hpp"
#include "wire.hpp"

namespace sandfort::compat::e2b {

namespace {

// The SDK's default template; Sandfort's default image stands for it.
constexpr const char* default_template = "base";
// The code interpreter SDK's default template: the image scripts/build-code-interpreter-image
// makes (python3, node, matplotlib, pandas, numpy).
constexpr const char* code_interpreter_template = "code-interpreter-v1";
constexpr const char* code_interpreter_image = "sandfort/code-interpreter:bookworm";
// E2B's longest sandbox life (24 h): a timeout beyond it is refused as E2B does.
constexpr std::int64_t max_timeout_s = 86400;

result<std::int64_t> read_timeout(const json& body) {
  std::optional<std::int64_t> t;
  if (auto r = api::read(body, "timeout", t); !r) return std::move(r).err();
  if (!t) return std::int64_t{0};
  if (*t < 1 || *t > max_timeout_s)
    return make_error(errc::invalid_argument, "timeout must be between 1 and 86400 seconds");
  return *t;
}

result<sandbox::create_request> parse_create(const std::string& text) {
  auto body = api::parse_object(text);
  if (!body) return std::move(body).err();
  sandbox::create_request req;
  req.wait = true;  // the SDK talks to the sandbox as soon as it is answered
  std::string template_id;
  if (auto r = api::read(*body, "templateID", template_id); !r) return std::move(r).err();
  if (template_id == code_interpreter_template)
    req.snapshot = code_interpreter_image;
  else if (template_id != default_template)
    req.snapshot = template_id;
  if (auto r = api::read(*body, "metadata", req.labels); !r) return std::move(r).err();
  if (auto r = api::read(*body, "envVars", req.env); !r) return std::move(r).err();
  auto timeout = read_timeout(*body);
  if (!timeout) return std::move(timeout).err();
  if (*timeout) req.ttl_s = *timeout;
  req.idle_timeout_s = 0;  // E2B's sandboxes live out their timeout, busy or not
  auto egress = egress_of(*body);  // never more than the native create's (docs/e2b.md, "Network")
  if (!egress) return std::move(egress).err();
  if (*egress) {
    req.egress_allowlist = std::move(**egress);
    req.egress_given = true;
  }
  if (auto n = body->find("network"); n != body->end() && n->is_object() && n->value("allowPublicTraffic", false))
    req.public_preview = true;  // asked for by name, as the native create's public_preview
  return req;
}

http::response refuse(const error& e, const http::context& ctx) { return rest_error(e, ctx.request_id); }

// The create and connect answers: the sandbox and a new access token for its sandbox plane.
http::response with_token(const sandbox::sandbox_view& v, unsigned status, const http::context& ctx) {
  auto j = with_new_token(v);
  if (!j) return refuse(j.err(), ctx);
  return http::json_response(status, *j);
}

// metadata=<urlencoded k=v pairs, each part urlencoded again> (the SDK's list filter).
result<std::vector<std::pair<std::string, std::string>>> parse_metadata_filter(const std::string& q) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t start = 0;
  while (start < q.size()) {
    auto amp = q.find('&', start);
    std::string one = q.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    auto eq = one.find('=');
    if (eq == std::string::npos || eq == 0) return make_error(errc::invalid_argument, "metadata filter must be k=v");
    out.emplace_back(http::percent_decode(http::percent_decode(one.substr(0, eq))),
                     http::percent_decode(http::percent_decode(one.substr(eq + 1))));
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return out;
}

awaitable<http::response> create_sandbox(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto req = parse_create(ctx.req.body());
  if (!req) co_return refuse(req.err(), ctx);
  auto made = co_await deps.sandboxes.create(p.org_id, *req, api::actor_of(p, ctx.request_id, ctx.remote));
  if (!made) co_return refuse(made.err(), ctx);
  co_return with_token(*made, 201, ctx);
}

awaitable<http::response> get_sandbox(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto v = co_await deps.sandboxes.get(p.org_id, ctx.params["id"], "", std::chrono::seconds(0));
  if (!v) co_return refuse(v.err(), ctx);
  co_return http::json_response(200, sandbox_json(*v));
}

awaitable<http::response> list_sandboxes(dependencies& deps, http::context& ctx, const auth::principal& p) {
  sandbox::list_request req;
  auto limit = api::query_int(ctx, "limit");
  if (!limit) co_return refuse(limit.err(), ctx);
  req.limit = static_cast<std::size_t>(std::clamp<std::int64_t>(limit->value_or(100), 1, 1000));
  if (auto it = ctx.query.find("nextToken"); it != ctx.query.end()) req.cursor = it->second;
  if (auto it = ctx.query.find("metadata"); it != ctx.query.end()) {
    auto labels = parse_metadata_filter(it->second);
    if (!labels) co_return refuse(labels.err(), ctx);
    req.labels = std::move(*labels);
  }
  // state=running|paused (the SDK repeats it for several: then all live ones are listed).
  if (auto it = ctx.query.find("state"); it != ctx.query.end())
    req.state = it->second == "running" ? "started" : it->second == "paused" ? "paused" : "";
  auto page = co_await deps.sandboxes.list(p.org_id, req);
  if (!page) co_return refuse(page.err(), ctx);
  json items = json::array();
  for (const auto& v : page->items) items.push_back(sandbox_json(v));
  co_return page_response(items, page->next_cursor);
}

awaitable<http::response> kill_sandbox(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto r = co_await deps.sandboxes.remove(p.org_id, ctx.params["id"], api::actor_of(p, ctx.request_id, ctx.remote));
  if (!r) co_return refuse(r.err(), ctx);
  co_return http::empty_response(204);
}

awaitable<http::response> set_sandbox_timeout(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto body = api::parse_object(ctx.req.body());
  if (!body) co_return refuse(body.err(), ctx);
  auto timeout = read_timeout(*body);
  if (!timeout) co_return refuse(timeout.err(), ctx);
  if (!*timeout) co_return refuse(make_error(errc::invalid_argument, "timeout is required"), ctx);
  sandbox::update_request u;
  u.ttl_s = *timeout;
  auto r = co_await deps.sandboxes.update(p.org_id, ctx.params["id"], u, api::actor_of(p, ctx.request_id, ctx.remote));
  if (!r) co_return refuse(r.err(), ctx);
  co_return http::empty_response(204);
}

awaitable<http::response> pause_sandbox(dependencies& deps, http::context& ctx, const auth::principal& p) {
  const auto who = api::actor_of(p, ctx.request_id, ctx.remote);
  auto v = co_await deps.sandboxes.get(p.org_id, ctx.params["id"], "", std::chrono::seconds(0));
  if (!v) co_return refuse(v.err(), ctx);
  // The SDK reads 409 as "already paused".
  if (v->state == "paused") co_return refuse(make_error(errc::conflict, "sandbox is already paused"), ctx);
  auto r = co_await deps.sandboxes.change_state(api::sandbox_backend::change::pause, p.org_id, v->id, who);
  if (!r) co_return refuse(r.err(), ctx);
  co_return http::empty_response(204);
}

// Resumes a paused sandbox (a running one is left as it is), sets the timeout when given, and
// answers a fresh access token: the ones given before keep working (tokens_kept).
awaitable<http::response> connect_sandbox(dependencies& deps, http::context& ctx, const auth::principal& p) {
  auto body = api::parse_object(ctx.req.body());
  if (!body) co_return refuse(body.err(), ctx);
  auto timeout = read_timeout(*body);
  if (!timeout) co_return refuse(timeout.err(), ctx);
  const auto who = api::actor_of(p, ctx.request_id, ctx.remote);
  auto v = co_await deps.sandboxes.get(p.org_id, ctx.params["id"], "", std::chrono::seconds(0));
  if (!v) co_return refuse(v.err(), ctx);
  if (v->state == "paused" || v->state == "stopped") {
    const auto change = v->state == "paused" ? api::sandbox_backend::change::resume : api::sandbox_backend::change::start;
    v = co_await deps.sandboxes.change_state(change, p.org_id, v->id, who);
    if (!v) co_return refuse(v.err(), ctx);
  }
  if (*timeout) {
    sandbox::update_request u;
    u.ttl_s = *timeout;
    v = co_await deps.sandboxes.update(p.org_id, v->id, u, who);
    if (!v) co_return refuse(v.err(), ctx);
  }
  co_return with_token(*v, 200, ctx);
}

}  // namespace

std::vector<api::api_route> control_routes() {
  using auth::permission;
  using http::verb;
  return {
      rest_route(verb::post, "/e2b/v2/sandboxes", permission::use_sandboxes, create_sandbox),
      rest_route(verb::get, "/e2b/v2/sandboxes", permission::read, list_sandboxes),
      rest_route(verb::get, "/e2b/sandboxes/{id}", permission::read, get_sandbox),
      rest_route(verb::delete_, "/e2b/sandboxes/{id}", permission::use_sandboxes, kill_sandbox),
      rest_route(verb::post, "/e2b/sandboxes/{id}/timeout", permission::use_sandboxes, set_sandbox_timeout),
      rest_route(verb::post, "/e2b/sandboxes/{id}/pause", permission::use_sandboxes, pause_sandbox),
      rest_route(verb::post, "/e2b/v2/sandboxes/{id}/connect", permission::use_sandboxes, connect_sandbox),
      // snapshots.cpp
      rest_route(verb::post, "/e2b/sandboxes/{id}/snapshots", permission::use_sandboxes, create_snapshot),
      rest_route(verb::get, "/e2b/snapshots", permission::read, list_snapshots),
      rest_route(verb::delete_, "/e2b/templates/{id}", permission::use_sandboxes, delete_snapshot),
      rest_route(verb::post, "/e2b/sandboxes/{id}/fork", permission::use_sandboxes, fork_sandbox),
      rest_route(verb::get, "/e2b/sandboxes/{id}/metrics", permission::read, get_metrics),
      rest_route(verb::put, "/e2b/sandboxes/{id}/network", permission::use_sandboxes, update_network),
  };
}

}  // namespace sandfort::compat::e2b
