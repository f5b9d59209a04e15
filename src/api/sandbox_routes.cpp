// Sandboxes. The commands that run in them (exec, code-run) are answered in stream_routes.cpp:
// their results may be tens of megabytes, encoded off the I/O thread and written there.
#include <charconv>

#include "json_body.hpp"
#include "routes.hpp"
#include "sandbox_bodies.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::api {

using nlohmann::json;
using boost::asio::awaitable;

namespace {

json sandbox_json(const sandbox::sandbox_view& v) {
  json j = {{"id", v.id},
            {"name", v.name.empty() ? json(nullptr) : json(v.name)},
            {"state", v.state},
            {"snapshot", v.snapshot},
            {"created_at", v.created_at},
            {"updated_at", v.updated_at},
            {"expires_at", v.expires_at ? json(*v.expires_at) : json(nullptr)},
            {"ttl_s", v.spec.ttl_s ? json(*v.spec.ttl_s) : json(nullptr)},
            {"idle_timeout_s", v.spec.idle_timeout_s},
            {"resources",
             {{"cpus", v.spec.limits.cpus},
              {"memory_mb", v.spec.limits.memory_mb},
              {"pids", v.spec.limits.pids},
              {"disk_mb", v.spec.limits.disk_mb}}},
            {"egress_allowlist", v.spec.egress_allowlist},
            {"egress_deny", v.spec.egress_deny},
            {"egress_rules", sandbox::egress_rules_to_json(v.spec.egress_rules)},
            {"labels", v.spec.labels},
            {"env_keys", [&] {
               json keys = json::array();
               for (const auto& kv : v.spec.env) keys.push_back(kv.first);
               return keys;
             }()},
            {"user", v.spec.user.empty() ? json(nullptr) : json(v.spec.user)},
            {"workdir", v.spec.workdir.empty() ? json(nullptr) : json(v.spec.workdir)},
            {"public_preview", v.spec.public_preview},
            {"runtime", v.spec.runtime},
            {"volumes", [&] {
               json volumes = json::array();
               for (const auto& m : v.spec.volumes)
                 volumes.push_back({{"name", m.name}, {"mount_path", m.mount_path}, {"read_only", m.read_only}});
               return volumes;
             }()},
            // Names, variables and placeholders (worthless outside this sandbox); never a value.
            {"secrets", [&] {
               json attached = json::array();
               for (const auto& a : v.spec.secrets)
                 attached.push_back({{"name", a.name}, {"env", a.env}, {"placeholder", a.placeholder}});
               return attached;
             }()},
            {"preview_url_template", v.preview_url_template}};
  if (!v.error_message.empty()) j["error_message"] = v.error_message;
  return j;
}

result<sandbox::list_request> parse_list(const http::context& ctx) {
  sandbox::list_request l;
  auto limit = query_int(ctx, "limit");
  if (!limit) return std::move(limit).err();
  if (*limit && (**limit < 1 || **limit > 1000))
    return make_error(errc::invalid_argument, "limit must be between 1 and 1000");
  l.limit = static_cast<std::size_t>(limit->value_or(100));
  if (auto it = ctx.query.find("state"); it != ctx.query.end()) l.state = it->second;
  if (auto it = ctx.query.find("cursor"); it != ctx.query.end()) l.cursor = it->second;
  if (auto it = ctx.query.find("label"); it != ctx.query.end()) {
    // label=k:v, several separated by commas
    std::string_view rest = it->second;
    while (!rest.empty()) {
      auto comma = rest.find(',');
      std::string_view one = rest.substr(0, comma);
      auto colon = one.find(':');
      if (colon == std::string_view::npos || colon == 0)
        return make_error(errc::invalid_argument, "label filter must be key:value");
      l.labels.emplace_back(std::string(one.substr(0, colon)), std::string(one.substr(colon + 1)));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return l;
}

template <typename T, typename F>
http::response reply(const result<T>& r, const http::context& ctx, unsigned status, F&& to_json) {
  if (!r) return http::error_response(r.err(), ctx.request_id);
  return http::json_response(status, to_json(*r));
}

// POST /v1/sandboxes/{id}/stop|start|pause|resume: one state change, answered with the sandbox.
api_route state_route(const char* path, sandbox_backend::change change) {
  return {http::verb::post, path, auth::permission::use_sandboxes,
          [change](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
            auto id = ctx.params["id"];
            const auto who = actor_of(p, ctx.request_id, ctx.remote);
            auto r = co_await deps.sandboxes.change_state(change, p.org_id, id, who);
            co_return reply(r, ctx, 200, sandbox_json);
          }};
}

}  // namespace

std::vector<api_route> sandbox_routes() {
  using auth::permission;
  return {
      {http::verb::post, "/v1/sandboxes", permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.sandboxes;
         auto req = parse_create(ctx.req.body());
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await svc.create(p.org_id, *req, who);
         co_return reply(r, ctx, 201, sandbox_json);
       }},
      {http::verb::get, "/v1/sandboxes", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.sandboxes;
         auto req = parse_list(ctx);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         auto r = co_await svc.list(p.org_id, *req);
         co_return reply(r, ctx, 200, [](const sandbox::list_page& page) {
           json items = json::array();
           for (const auto& v : page.items) items.push_back(sandbox_json(v));
           return json{{"items", items},
                       {"next_cursor", page.next_cursor.empty() ? json(nullptr) : json(page.next_cursor)}};
         });
       }},
      {http::verb::get, "/v1/sandboxes/{id}", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.sandboxes;
         auto timeout = query_int(ctx, "timeout_s");
         if (!timeout) co_return http::error_response(timeout.err(), ctx.request_id);
         std::int64_t wait_s = std::min<std::int64_t>(timeout->value_or(60), 300);
         std::string wait_for = ctx.query.count("wait_for") ? ctx.query["wait_for"] : "";
         auto id = ctx.params["id"];
         auto r = co_await svc.get(p.org_id, id, wait_for, std::chrono::seconds(wait_s));
         co_return reply(r, ctx, 200, sandbox_json);
       }},
      {http::verb::patch, "/v1/sandboxes/{id}", permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.sandboxes;
         auto req = parse_update(ctx.req.body());
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         auto id = ctx.params["id"];
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await svc.update(p.org_id, id, *req, who);
         co_return reply(r, ctx, 200, sandbox_json);
       }},
      // A preview token reaches the sandbox's app with every method and WebSockets: a notebook or
      // dev server there runs code for whoever holds it. So it is a member's (docs/api.md, Roles).
      {http::verb::get, "/v1/sandboxes/{id}/preview/{port}", permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.sandboxes;
         auto id = ctx.params["id"];
         int port = 0;
         const std::string& text = ctx.params["port"];
         auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
         if (ec != std::errc{} || end != text.data() + text.size()) port = 0;
         auto r = svc.preview(p.org_id, id, port);
         co_return reply(r, ctx, 200, [](const sandbox::preview_link& l) {
           return json{{"url", l.url},
                       {"token", l.token.empty() ? json(nullptr) : json(l.token)},
                       {"link", l.link}};
         });
       }},
      {http::verb::get, "/v1/sandboxes/{id}/metrics", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.sandboxes;
         auto id = ctx.params["id"];
         auto r = co_await svc.metrics(p.org_id, id);
         co_return reply(r, ctx, 200, [](const sandbox::sandbox_metrics& m) {
           return json{{"cpu_percent", m.cpu_percent},
                       {"memory_bytes", m.memory_bytes},
                       {"memory_limit_bytes", m.memory_limit_bytes},
                       {"pids", m.pids},
                       {"egress_bytes_in", m.egress_bytes_in},
                       {"egress_bytes_out", m.egress_bytes_out},
                       {"egress_allowed", m.egress_allowed},
                       {"egress_denied", m.egress_denied},
                       {"disk_bytes", m.disk_bytes ? json(*m.disk_bytes) : json(nullptr)}};
         });
       }},
      {http::verb::get, "/v1/sandboxes/{id}/ports", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.sandboxes;
         auto id = ctx.params["id"];
         auto r = co_await svc.ports(p.org_id, id);
         co_return reply(r, ctx, 200, [](const std::vector<sandbox::listening_port>& ports) {
           json items = json::array();
           for (const auto& port : ports)
             items.push_back({{"port", port.port},
                              {"address", port.address},
                              {"protocol", "tcp"},
                              {"family", port.family},
                              {"pid", port.pid ? json(*port.pid) : json(nullptr)},
                              {"process", port.process ? json(*port.process) : json(nullptr)},
                              {"url", port.url},
                              {"previewable", port.previewable}});
           return json{{"items", items}};
         });
       }},
      state_route("/v1/sandboxes/{id}/stop", sandbox_backend::change::stop),
      state_route("/v1/sandboxes/{id}/start", sandbox_backend::change::start),
      state_route("/v1/sandboxes/{id}/pause", sandbox_backend::change::pause),
      state_route("/v1/sandboxes/{id}/resume", sandbox_backend::change::resume),
      {http::verb::delete_, "/v1/sandboxes/{id}", permission::use_sandboxes,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto& svc = deps.sandboxes;
         auto id = ctx.params["id"];
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto r = co_await svc.remove(p.org_id, id, who);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::empty_response(204);
       }},
  };
}

}  // namespace sandfort::api
