// An organization's webhooks (docs/events.md, "Webhooks"): register, list, read, change, delete,
// rotate the signing secret, and read the delivery log. Admins only, reads included: a webhook's
// URL is often a credential itself (a chat service's incoming-webhook URL), and the delivery log
// shows what the receiver answered. The signing secret is in the answer of create and
// rotate-secret only, never in a list, a log line or the audit chain.
#include <algorithm>
#include <string>
#include <vector>

#include "json_body.hpp"
#include "routes.hpp"
#include "sandfort/audit/lifecycle_events.hpp"

namespace sandfort::api {

namespace {

using nlohmann::json;

constexpr std::size_t max_description = 256;
constexpr std::int64_t max_keep_previous_s = 86400;  // the old secret signs at most a day after a rotation

error bad_webhook(std::string message) { return make_error(errc::invalid_argument, std::move(message)); }

result<void> only_fields(const json& body, std::initializer_list<const char*> known) {
  for (const auto& item : body.items()) {
    const std::string& key = item.key();
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return bad_webhook("field '" + key.substr(0, 64) + "' is not known (" + list + ")");
    }
  }
  return {};
}

result<std::vector<std::string>> check_types(std::vector<std::string> types) {
  std::vector<std::string> out;
  for (auto& t : types) {
    if (!audit::is_lifecycle_event_type(t))
      return bad_webhook("types: '" + t.substr(0, 64) + "' is not an event type (docs/events.md lists them)");
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(std::move(t));
  }
  return out;
}

result<void> check_description(const std::string& d) {
  if (d.size() > max_description)
    return bad_webhook("description is longer than " + std::to_string(max_description) + " bytes");
  if (std::any_of(d.begin(), d.end(), [](char c) { return c == '\0' || c == '\r' || c == '\n'; }))
    return bad_webhook("description must not contain NUL, CR or LF");
  return {};
}

result<webhooks::webhook_create> parse_create(const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  if (auto r = only_fields(*body, {"url", "types", "description"}); !r) return std::move(r).err();
  webhooks::webhook_create c;
  if (auto r = read(*body, "url", c.url); !r) return std::move(r).err();
  if (auto r = read(*body, "types", c.types); !r) return std::move(r).err();
  if (auto r = read(*body, "description", c.description); !r) return std::move(r).err();
  if (c.url.empty()) return bad_webhook("url is required");
  auto types = check_types(std::move(c.types));
  if (!types) return std::move(types).err();
  c.types = std::move(*types);
  if (auto r = check_description(c.description); !r) return std::move(r).err();
  return c;
}

result<webhooks::webhook_patch> parse_patch(const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  if (auto r = only_fields(*body, {"url", "types", "description", "enabled"}); !r) return std::move(r).err();
  webhooks::webhook_patch u;
  if (auto r = read(*body, "url", u.url); !r) return std::move(r).err();
  if (auto r = read(*body, "types", u.types); !r) return std::move(r).err();
  if (auto r = read(*body, "description", u.description); !r) return std::move(r).err();
  if (body->contains("enabled") && !(*body)["enabled"].is_null()) {
    bool enabled = true;
    if (auto r = read(*body, "enabled", enabled); !r) return std::move(r).err();
    u.enabled = enabled;
  }
  if (!u.url && !u.types && !u.description && !u.enabled)
    return bad_webhook("a change needs at least one of url, types, description, enabled");
  if (u.url && u.url->empty()) return bad_webhook("url must not be empty");
  if (u.types) {
    auto types = check_types(std::move(*u.types));
    if (!types) return std::move(types).err();
    u.types = std::move(*types);
  }
  if (u.description)
    if (auto r = check_description(*u.description); !r) return std::move(r).err();
  return u;
}

json webhook_json(const webhooks::webhook_view& v) {
  return {{"id", v.id},         {"url", v.url},           {"types", v.types},           {"description", v.description},
          {"enabled", v.enabled}, {"cursor", v.cursor}, {"created_at", v.created_at}, {"updated_at", v.updated_at}};
}

json with_secret_json(const webhooks::webhook_with_secret& w) {
  json j = webhook_json(w.webhook);
  j["secret"] = w.secret;
  return j;
}

json delivery_json(const webhooks::delivery_view& d) {
  auto opt = [](const auto& o) { return o ? json(*o) : json(nullptr); };
  return {{"seq", d.seq},
          {"event_id", d.event_id},
          {"type", d.type},
          {"state", d.state},
          {"attempts", d.attempts},
          {"last_status", opt(d.last_status)},
          {"last_error", d.last_error},
          {"next_attempt_at", opt(d.next_attempt_at)},
          {"created_at", d.created_at},
          {"delivered_at", opt(d.delivered_at)}};
}

}  // namespace

std::vector<api_route> webhook_routes() {
  using auth::permission;
  using boost::asio::awaitable;
  return {
      {http::verb::post, "/v1/webhooks", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto req = parse_create(ctx.req);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         // Named: the task holds references until it is awaited.
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         auto creating = deps.webhooks.create(p.org_id, *req, who);
         auto r = co_await std::move(creating);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(201, with_secret_json(*r));
       }},
      {http::verb::get, "/v1/webhooks", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto r = deps.webhooks.list(p.org_id);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         json items = json::array();
         for (const auto& v : *r) items.push_back(webhook_json(v));
         co_return http::json_response(200, json{{"items", items}, {"next_cursor", nullptr}});
       }},
      {http::verb::get, "/v1/webhooks/{webhook}", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto r = deps.webhooks.get(p.org_id, ctx.params["webhook"]);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, webhook_json(*r));
       }},
      {http::verb::patch, "/v1/webhooks/{webhook}", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto req = parse_patch(ctx.req);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         const auto who = actor_of(p, ctx.request_id, ctx.remote);
         const std::string id = ctx.params["webhook"];
         auto updating = deps.webhooks.update(p.org_id, id, *req, who);
         auto r = co_await std::move(updating);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, webhook_json(*r));
       }},
      {http::verb::delete_, "/v1/webhooks/{webhook}", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto r = deps.webhooks.remove(p.org_id, ctx.params["webhook"], actor_of(p, ctx.request_id, ctx.remote));
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::empty_response(204);
       }},
      {http::verb::post, "/v1/webhooks/{webhook}/rotate-secret", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto body = parse_object(ctx.req);
         if (!body) co_return http::error_response(body.err(), ctx.request_id);
         if (auto known = only_fields(*body, {"keep_previous_s"}); !known)
           co_return http::error_response(known.err(), ctx.request_id);
         std::optional<std::int64_t> keep;
         if (auto r = read(*body, "keep_previous_s", keep); !r) co_return http::error_response(r.err(), ctx.request_id);
         if (keep && (*keep < 0 || *keep > max_keep_previous_s))
           co_return http::error_response(
               bad_webhook("keep_previous_s must be between 0 and " + std::to_string(max_keep_previous_s)),
               ctx.request_id);
         auto r = deps.webhooks.rotate_secret(p.org_id, ctx.params["webhook"], keep.value_or(0),
                                              actor_of(p, ctx.request_id, ctx.remote));
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, with_secret_json(*r));
       }},
      {http::verb::get, "/v1/webhooks/{webhook}/deliveries", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto limit = query_int(ctx, "limit");
         if (!limit) co_return http::error_response(limit.err(), ctx.request_id);
         auto cursor = query_int(ctx, "cursor");
         if (!cursor) co_return http::error_response(cursor.err(), ctx.request_id);
         const auto n = limit->value_or(50);
         if (n < 1 || n > 200)
           co_return http::error_response(bad_webhook("limit must be between 1 and 200"), ctx.request_id);
         auto r = deps.webhooks.deliveries(p.org_id, ctx.params["webhook"], cursor->value_or(0),
                                           static_cast<std::size_t>(n));
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         json items = json::array();
         for (const auto& d : r->items) items.push_back(delivery_json(d));
         const auto next = r->next_cursor.empty() ? json(nullptr) : json(r->next_cursor);
         co_return http::json_response(200, json{{"items", items}, {"next_cursor", next}});
       }},
  };
}

}  // namespace sandfort::api
