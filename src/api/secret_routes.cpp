// An organization's secrets (docs/secrets.md): create, list, get, rotate, delete, and the
// certificate of its interception CA. Values are write-only: read from a body, checked, handed to
// the backend to be sealed, and never written into a response, an error message or a log line.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "json_body.hpp"
#include "routes.hpp"
#include "sandfort/proxy/policy.hpp"
#include "sandfort/sandbox/spec.hpp"
#include "sandfort/secrets/placement_json.hpp"

namespace sandfort::api {

namespace {

using nlohmann::json;
using secrets::placement;

constexpr std::size_t max_hosts = 16;

error bad_secret(std::string message) { return make_error(errc::invalid_argument, std::move(message)); }

bool valid_secret_name(const std::string& n) {
  if (n.empty() || n.size() > 63 || !(n[0] >= 'a' && n[0] <= 'z')) return false;
  return std::all_of(n.begin(), n.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; });
}

// RFC 9110 token characters.
bool valid_header_name(const std::string& h) {
  if (h.empty() || h.size() > 64) return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// Headers that frame or route the request, or are the proxy's own: a secret cannot be put there.
bool reserved_header(std::string h) {
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const std::set<std::string> reserved = {"host",    "content-length", "transfer-encoding", "connection",
                                                 "upgrade", "te",             "trailer",           "keep-alive",
                                                 "proxy-authorization", "proxy-connection", "expect"};
  return reserved.contains(h);
}

bool has_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c == '\0' || c == '\r' || c == '\n'; });
}

bool valid_query_name(const std::string& q) {
  if (q.empty() || q.size() > 64) return false;
  return std::all_of(q.begin(), q.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == '~';
  });
}

// The value is checked but never quoted: no message below contains it.
result<void> check_value(const config& cfg, const std::string& value) {
  if (value.empty()) return bad_secret("value must not be empty");
  if (value.size() > static_cast<std::size_t>(cfg.secrets.max_value_bytes))
    return make_error(errc::payload_too_large, "value is longer than " + std::to_string(cfg.secrets.max_value_bytes) +
                                                   " bytes (secrets.max_value_bytes)");
  if (has_control(value)) return bad_secret("value must not contain NUL, CR or LF");
  return {};
}

// Lowercased, a trailing dot dropped; exact names or "*.suffix" as in an egress allowlist, but
// not "*": a secret goes to the hosts named for it, never to any host.
result<std::vector<std::string>> check_hosts(const std::vector<std::string>& hosts) {
  if (hosts.empty()) return bad_secret("hosts must name at least one host");
  if (hosts.size() > max_hosts) return bad_secret("hosts has more than " + std::to_string(max_hosts) + " entries");
  std::vector<std::string> out;
  for (const auto& h : hosts) {
    const auto n = proxy::normalize_host(h);
    const std::string rest = n.rfind("*.", 0) == 0 ? n.substr(2) : n;
    if (n == "*" || !sandbox::valid_host_pattern(n) || rest.empty() || rest.front() == '.' || rest.back() == '.' ||
        rest.find("..") != std::string::npos)
      return bad_secret("hosts entry '" + h.substr(0, 255) + "' must be a host name or '*.suffix' ('*' is not allowed)");
    if (std::find(out.begin(), out.end(), n) != out.end()) return bad_secret("hosts names '" + n + "' twice");
    out.push_back(n);
  }
  return out;
}

result<void> known_fields(const json& body, std::initializer_list<const char*> known) {
  for (const auto& item : body.items()) {
    const std::string& key = item.key();
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return bad_secret("field '" + key.substr(0, 64) + "' is not known (" + list + ")");
    }
  }
  return {};
}

result<placement> parse_placement(const json& body) {
  const int kinds = int(body.contains("header")) + int(body.contains("query")) + int(body.contains("basic_auth"));
  if (kinds != 1) return bad_secret("exactly one of 'header', 'query' or 'basic_auth' must say where the value goes");
  placement p;
  if (body.contains("header")) {
    p.type = placement::kind::header;
    p.format = "{value}";
    if (auto r = read(body, "header", p.header); !r) return std::move(r).err();
    if (auto r = read(body, "format", p.format); !r) return std::move(r).err();
    if (!valid_header_name(p.header)) return bad_secret("header must be a header name (letters, digits, '-', …)");
    if (reserved_header(p.header)) return bad_secret("header '" + p.header + "' cannot carry a secret");
    const auto at = p.format.find("{value}");
    if (at == std::string::npos || p.format.find("{value}", at + 1) != std::string::npos)
      return bad_secret("format must contain '{value}' exactly once");
    if (p.format.size() > 256 || has_control(p.format))
      return bad_secret("format must be at most 256 characters, without NUL, CR or LF");
    return p;
  }
  if (body.contains("format")) return bad_secret("format goes with 'header' only");
  if (body.contains("query")) {
    p.type = placement::kind::query;
    if (auto r = read(body, "query", p.query); !r) return std::move(r).err();
    if (!valid_query_name(p.query)) return bad_secret("query must be a parameter name of letters, digits, '_', '-', '.', '~'");
    return p;
  }
  p.type = placement::kind::basic_auth;
  const json& b = body.at("basic_auth");
  if (!b.is_object()) return bad_secret("field 'basic_auth' must be an object {\"username\": …}");
  if (auto r = known_fields(b, {"username"}); !r) return std::move(r).err();
  if (auto r = read(b, "username", p.username); !r) return std::move(r).err();
  if (p.username.empty() || p.username.size() > 128 || p.username.find(':') != std::string::npos ||
      has_control(p.username))
    return bad_secret("basic_auth.username must be 1 to 128 characters, without ':', NUL, CR or LF");
  return p;
}

result<secrets::secret_create> parse_secret_create(const config& cfg, const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  if (auto r = known_fields(*body, {"name", "value", "hosts", "header", "format", "query", "basic_auth"}); !r)
    return std::move(r).err();
  secrets::secret_create c;
  if (auto r = read(*body, "name", c.name); !r) return std::move(r).err();
  if (auto r = read(*body, "value", c.value); !r) return std::move(r).err();
  if (auto r = read(*body, "hosts", c.hosts); !r) return std::move(r).err();
  if (!valid_secret_name(c.name))
    return bad_secret("name must be 1 to 63 characters: a lowercase letter, then lowercase letters, digits, '_' or '-'");
  if (auto r = check_value(cfg, c.value); !r) return std::move(r).err();
  auto hosts = check_hosts(c.hosts);
  if (!hosts) return std::move(hosts).err();
  c.hosts = std::move(*hosts);
  auto p = parse_placement(*body);
  if (!p) return std::move(p).err();
  c.placement = std::move(*p);
  return c;
}

result<secrets::secret_rotate> parse_secret_rotate(const config& cfg, const http::request& req) {
  auto body = parse_object(req);
  if (!body) return std::move(body).err();
  if (auto r = known_fields(*body, {"value", "hosts"}); !r) return std::move(r).err();
  secrets::secret_rotate u;
  if (auto r = read(*body, "value", u.value); !r) return std::move(r).err();
  if (auto r = read(*body, "hosts", u.hosts); !r) return std::move(r).err();
  if (!u.value && !u.hosts) return bad_secret("a rotation needs 'value', 'hosts' or both");
  if (u.value)
    if (auto r = check_value(cfg, *u.value); !r) return std::move(r).err();
  if (u.hosts) {
    auto hosts = check_hosts(*u.hosts);
    if (!hosts) return std::move(hosts).err();
    u.hosts = std::move(*hosts);
  }
  return u;
}

json secret_json(const secrets::secret_view& v) {
  return {{"name", v.name},       {"hosts", v.hosts},           {"placement", secrets::placement_json(v.placement)},
          {"version", v.version}, {"created_at", v.created_at}, {"updated_at", v.updated_at}};
}

}  // namespace

std::vector<api_route> secret_routes() {
  using auth::permission;
  using boost::asio::awaitable;
  return {
      {http::verb::post, "/v1/secrets", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto req = parse_secret_create(deps.cfg, ctx.req);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         auto r = deps.secrets.create(p.org_id, *req, actor_of(p, ctx.request_id, ctx.remote));
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(201, secret_json(*r));
       }},
      {http::verb::get, "/v1/secrets", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto r = deps.secrets.list(p.org_id);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         json items = json::array();
         for (const auto& v : *r) items.push_back(secret_json(v));
         co_return http::json_response(200, json{{"items", items}, {"next_cursor", nullptr}});
       }},
      {http::verb::get, "/v1/secrets/{name}", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto r = deps.secrets.get(p.org_id, ctx.params["name"]);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, secret_json(*r));
       }},
      {http::verb::put, "/v1/secrets/{name}", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto req = parse_secret_rotate(deps.cfg, ctx.req);
         if (!req) co_return http::error_response(req.err(), ctx.request_id);
         auto r = deps.secrets.rotate(p.org_id, ctx.params["name"], *req, actor_of(p, ctx.request_id, ctx.remote));
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, secret_json(*r));
       }},
      {http::verb::delete_, "/v1/secrets/{name}", permission::manage_org,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto r = deps.secrets.remove(p.org_id, ctx.params["name"], actor_of(p, ctx.request_id, ctx.remote));
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::empty_response(204);
       }},
      {http::verb::get, "/v1/interception-ca", permission::read,
       [](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
         auto r = deps.secrets.interception_ca_pem(p.org_id);
         if (!r) co_return http::error_response(r.err(), ctx.request_id);
         co_return http::json_response(200, json{{"certificate_pem", *r}});
       }},
  };
}

}  // namespace sandfort::api
