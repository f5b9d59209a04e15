#include "wire.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/beast/http/read.hpp>

#include "sandfort/core/clock.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::compat::e2b {

namespace {
token_backend* the_tokens = nullptr;

const char* connect_code(errc c) {
  switch (c) {
    case errc::not_found: return "not_found";
    case errc::unauthenticated: return "unauthenticated";
    case errc::permission_denied: return "permission_denied";
    case errc::invalid_argument: return "invalid_argument";
    case errc::conflict: return "failed_precondition";
    case errc::rate_limited: return "resource_exhausted";
    case errc::quota_exceeded: return "resource_exhausted";
    case errc::unavailable: return "unavailable";
    default: return "internal";
  }
}
}  // namespace

http::response rest_error(const error& e, const std::string& request_id) {
  const auto status = static_cast<unsigned>(http_status(e.code));
  auto res = http::json_response(status, {{"code", status}, {"message", e.message}});
  res.set("X-Request-Id", request_id);
  if (e.retry_after_s) res.set(http::bhttp::field::retry_after, std::to_string(e.retry_after_s));
  return res;
}

http::response connect_error(const error& e, const std::string& request_id) {
  auto res = http::json_response(static_cast<unsigned>(http_status(e.code)),
                                 {{"code", connect_code(e.code)}, {"message", e.message}});
  res.set("X-Request-Id", request_id);
  if (e.retry_after_s) res.set(http::bhttp::field::retry_after, std::to_string(e.retry_after_s));
  return res;
}

http::response stream_error(const error& e, const std::string& request_id) {
  http::response res{http::bhttp::status::ok, 11};
  res.set(http::bhttp::field::content_type, "application/connect+json");
  res.set("X-Request-Id", request_id);
  res.body() = envelope(end_stream_flag, json{{"error", json{{"code", connect_code(e.code)}, {"message", e.message}}}});
  res.prepare_payload();
  return res;
}

std::shared_ptr<const api::route_dialect> rest_dialect() {
  static const auto d = std::make_shared<const api::route_dialect>(api::route_dialect{"X-API-KEY", rest_error});
  return d;
}

std::shared_ptr<const api::route_dialect> sandbox_dialect() {
  static const auto d = std::make_shared<const api::route_dialect>(api::route_dialect{"", connect_error});
  return d;
}

api::api_route rest_route(http::verb m, std::string pattern, auth::permission n, api::buffered_handler h) {
  api::api_route r{m, std::move(pattern), n, std::move(h)};
  r.dialect = rest_dialect();
  return r;
}

http::response page_response(const nlohmann::json& items, const std::string& next_token) {
  auto res = http::json_response(200, items);
  if (!next_token.empty()) res.set("X-Next-Token", next_token);
  return res;
}

token_backend* tokens() { return the_tokens; }
void set_tokens(token_backend* t) { the_tokens = t; }

result<std::string> mint_token(const std::string& sandbox_id) {
  if (!the_tokens) return make_error(errc::internal, "the E2B access tokens are not served");
  std::string token = "sfe2b_" + random_hex(32);
  if (auto r = the_tokens->add(sandbox_id, sha256_hex(token)); !r) return std::move(r).err();
  return token;
}

result<nlohmann::json> with_new_token(const sandbox::sandbox_view& v) {
  auto token = mint_token(v.id);
  if (!token) return std::move(token).err();
  nlohmann::json j = sandbox_json(v);
  j["envdAccessToken"] = *token;
  // The code interpreter SDK sends this one alone on /contexts (port 49999): the same token.
  j["trafficAccessToken"] = *token;
  return j;
}

namespace {
constexpr const char* gone_message = "the sandbox is deleted";

std::string header(const http::bhttp::fields& h, std::string_view name) {
  auto it = h.find(name);
  return it == h.end() ? std::string() : std::string(it->value());
}
}  // namespace

result<sandbox_call> authorize(dependencies& deps, const http::bhttp::fields& h) {
  sandbox_call call{"", header(h, "E2b-Sandbox-Id"), header(h, "E2b-Sandbox-Port")};
  std::string token = header(h, "X-Access-Token");
  if (token.empty() && call.port == interpreter_port) token = header(h, "E2B-Traffic-Access-Token");
  const auto denied = make_error(errc::unauthenticated, "a valid X-Access-Token for this sandbox is required");
  if (call.sandbox_id.empty() || token.empty() || call.sandbox_id.size() > 128 || token.size() > 256) return denied;
  if (!the_tokens) return make_error(errc::unavailable, "the E2B sandbox plane is not served");
  auto grant = the_tokens->grant_of(call.sandbox_id, sha256_hex(token));
  if (!grant) return grant.err().code == errc::not_found ? denied : std::move(grant).err();
  if (grant->deleted) return make_error(errc::conflict, gone_message);
  call.org_id = std::move(grant->org_id);
  if (call.port.empty()) call.port = envd_port;
  auth::principal holder;
  holder.org_id = call.org_id;
  holder.id = "e2b-token:" + call.sandbox_id;
  holder.granted = auth::role::member;
  const auto& limit = deps.limiter.limit_for(holder);
  const auto& org_limit = deps.limiter.org_limit_for(holder);
  if (limit.rate_per_s <= 0 && org_limit.rate_per_s <= 0) return call;
  auto decided = deps.limiter.admit(holder.id, limit, "org:" + call.org_id, org_limit);
  if (decided.allowed) return call;
  error e = make_error(errc::rate_limited, decided.by_org ? "rate limit of this organization exceeded"
                                                          : "rate limit of this sandbox's access token exceeded");
  e.retry_after_s = decided.retry_after_s;
  return e;
}

bool is_gone(const error& e) { return e.code == errc::conflict && e.message == gone_message; }

http::response not_running(const std::string& why) { return http::json_response(502, {{"code", 502}, {"message", why}}); }

http::response refuse_call(const error& e, const std::string& request_id) {
  return is_gone(e) ? not_running(e.message) : connect_error(e, request_id);
}

audit::actor token_actor(const sandbox_call& call, const std::string& request_id, const std::string& remote) {
  return {"e2b-token:" + call.sandbox_id, request_id, remote};
}

awaitable<bool> event_translator::write(std::string_view bytes) {
  pending_.append(bytes);
  for (auto end = pending_.find("\n\n"); end != std::string::npos; end = pending_.find("\n\n")) {
    event e;
    for (std::size_t start = 0; start < end;) {
      auto nl = std::min(pending_.find('\n', start), end);
      std::string_view line(pending_.data() + start, nl - start);
      if (line.starts_with("event: ")) e.name = line.substr(7);
      if (line.starts_with("data: ")) e.data.append(line.substr(6));
      start = nl + 1;
    }
    pending_.erase(0, end + 2);
    std::string frame = translate(e);
    if (frame.empty()) continue;
    if (!co_await out_.write(frame)) co_return false;
  }
  co_return pending_.size() <= max_event_bytes_;
}

awaitable<result<void>> relay_body(sandbox::agent_stream& stream, boost::beast::flat_buffer& buffer,
                                   agent_body_parser& parser, sandbox::byte_sink& sink) {
  constexpr std::size_t piece_bytes = 16 * 1024;
  auto piece = std::make_unique<char[]>(piece_bytes);
  while (!parser.is_done()) {
    parser.get().body().data = piece.get();
    parser.get().body().size = piece_bytes;
    auto [ec, n] = co_await boost::beast::http::async_read_some(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (ec && ec != boost::beast::http::error::need_buffer)
      co_return make_error(errc::unavailable, "the agent's stream broke");
    const std::size_t got = piece_bytes - parser.get().body().size;
    if (got && !co_await sink.write(std::string_view(piece.get(), got))) co_return result<void>{};
  }
  co_return result<void>{};
}

std::string e2b_state(const std::string& state) {
  if (state == "started" || state == "creating" || state == "pulling") return "running";
  return state;
}

namespace {
// The SDK's getHost(port) is `${port}-${sandboxId}.${domain}`: with the domain of the sandbox's
// preview URLs (what follows "{port}-<id>." in their template, the listener's port included) it
// names the sandbox's preview host. Null when the template has another shape (a configured
// preview.url_template): then getHost names nothing of Sandfort's (docs/e2b.md, "getHost").
nlohmann::json preview_domain(const sandbox::sandbox_view& v) {
  const std::string& t = v.preview_url_template;
  const auto scheme = t.find("://");
  if (scheme == std::string::npos) return nullptr;
  const std::string head = "{port}-" + v.id + ".";
  if (t.compare(scheme + 3, head.size(), head) != 0) return nullptr;
  std::string rest = t.substr(scheme + 3 + head.size());
  if (rest.empty() || rest.find_first_of("/?#{") != std::string::npos) return nullptr;
  return rest;
}
}  // namespace

nlohmann::json sandbox_json(const sandbox::sandbox_view& v) {
  using nlohmann::json;
  const std::string& template_id = v.spec.snapshot_name.empty() ? v.snapshot : v.spec.snapshot_name;
  return {{"sandboxID", v.id},
          {"templateID", template_id},
          {"alias", v.name.empty() ? json(nullptr) : json(v.name)},
          {"clientID", "sandfort"},
          {"startedAt", v.created_at},
          {"endAt", v.expires_at ? json(*v.expires_at) : json(nullptr)},
          {"cpuCount", v.spec.limits.cpus},
          {"memoryMB", v.spec.limits.memory_mb},
          {"diskSizeMB", v.spec.limits.disk_mb},
          {"metadata", v.spec.labels},
          {"state", e2b_state(v.state)},
          {"envdVersion", envd_version},
          {"domain", preview_domain(v)},
          {"volumeMounts", json::array()}};
}

}  // namespace sandfort::compat::e2b
