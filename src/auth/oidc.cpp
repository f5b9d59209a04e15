#include "sandfort/auth/oidc.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>
#include <spdlog/spdlog.h>

#include "sandfort/auth/console_sessions.hpp"
#include "sandfort/auth/jwt.hpp"
#include "sandfort/auth/keys.hpp"
#include "sandfort/core/loggable.hpp"
#include "sandfort/http/url_client.hpp"

namespace sandfort::auth {

namespace asio = boost::asio;
using asio::awaitable;
using nlohmann::json;

struct oidc_verifier::issuer_state {
  const oidc_issuer_config& cfg;
  jwt::policy policy;
  std::string jwks_uri;                 // configured, or discovered once
  std::optional<jwt::key_set> keys;     // the last key set fetched
  time_point fresh_until{};             // keys are used without asking again until then
  std::optional<time_point> last_attempt;
  result<void> last_outcome = ok_t{};
  std::optional<asio::steady_timer> fetched;  // exactly while a fetch runs: its waiters wait on it
  // The discovery document, shared by the key fetch and the console's sign-in.
  std::optional<json> discovered;              // the last good one
  time_point discovery_until{};                // its outcome (a failure too) holds until then
  result<void> discovery_outcome = ok_t{};
  std::optional<asio::steady_timer> discovering;  // exactly while its fetch runs
};

namespace {

error refused() { return make_error(errc::unauthenticated, "invalid token"); }

// A claim by name, or by a dotted path into nested objects ("realm_access.roles").
const json* claim(const json& claims, const std::string& path) {
  const json* node = &claims;
  std::size_t start = 0;
  while (true) {
    auto dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end()) {
      // A claim whose own name has dots (a URL, as Auth0 and Okta name custom claims).
      if (start == 0 && claims.contains(path)) return &claims[path];
      return nullptr;
    }
    node = &*it;
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}

// Cache-Control: max-age=N (no-store / no-cache: as short as allowed).
std::chrono::seconds cache_lifetime(const http::response& res, const oidc_config& cfg) {
  auto lifetime = std::chrono::seconds(cfg.jwks_default_cache_s);
  if (auto it = res.find(http::bhttp::field::cache_control); it != res.end()) {
    std::string v(it->value());
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (v.find("no-store") != std::string::npos || v.find("no-cache") != std::string::npos) {
      lifetime = std::chrono::seconds(cfg.jwks_min_refresh_s);
    } else if (auto at = v.find("max-age="); at != std::string::npos) {
      long long n = 0;
      std::size_t i = at + 8;
      for (; i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])) && n < 1'000'000'000; ++i) n = n * 10 + (v[i] - '0');
      if (i > at + 8) lifetime = std::chrono::seconds(n);
    }
  }
  return std::clamp(lifetime, std::chrono::seconds(cfg.jwks_min_refresh_s), std::chrono::seconds(cfg.jwks_max_cache_s));
}

error idp_down(const oidc_issuer_config& is, const std::string& why) {
  return make_error(errc::idp_unavailable, "identity provider " + is.issuer + ": " + why);
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

url_fetcher network_fetcher(std::chrono::seconds timeout) {
  return [timeout](std::string url, const oidc_issuer_config& issuer) -> awaitable<result<http::response>> {
    http::url_fetch_options options;
    options.timeout = timeout;
    options.ca_file = issuer.ca_file;
    auto parts = http::parse_url(url);
    options.allow_plain_http = parts && is_loopback_host(parts->host);
    co_return co_await http::fetch_url(std::move(url), std::move(options));
  };
}

form_poster network_poster(std::chrono::seconds timeout) {
  return [timeout](std::string url, std::string form, std::string authorization,
                   const oidc_issuer_config& issuer) -> awaitable<result<http::response>> {
    http::url_fetch_options options;
    options.timeout = timeout;
    options.ca_file = issuer.ca_file;
    // A token answer is a few KiB; a provider that sends more is not answering a token request.
    options.body_limit = 64u << 10;
    auto parts = http::parse_url(url);
    options.allow_plain_http = parts && is_loopback_host(parts->host);
    co_return co_await http::post_form(std::move(url), std::move(form), std::move(authorization), std::move(options));
  };
}

oidc_verifier::oidc_verifier(const oidc_config& cfg, store::database& db, const clock& clk, url_fetcher fetch)
    : cfg_(cfg), db_(db), clk_(clk), fetch_(std::move(fetch)) {
  for (const auto& ic : cfg.issuers) {
    auto is = std::make_unique<issuer_state>(issuer_state{ic, {}, ic.jwks_uri, {}, {}, {}, ok_t{}, {}});
    is->policy.issuer = ic.issuer;
    is->policy.audiences = ic.audiences;
    for (const auto& a : ic.algorithms)
      if (auto alg = jwt::parse_algorithm(a)) is->policy.algorithms.push_back(*alg);
    is->policy.leeway = std::chrono::seconds(cfg.leeway_s);
    is->policy.max_token_bytes = static_cast<std::size_t>(cfg.max_token_bytes);
    issuers_.push_back(std::move(is));
  }
}

oidc_verifier::~oidc_verifier() = default;

// The issuer's discovery document, fetched now: its issuer must be this one exactly (a document
// naming another is a mix-up in the making).
awaitable<result<void>> oidc_verifier::fetch_discovery(issuer_state& is) {
  std::string base = is.cfg.issuer;
  if (base.ends_with('/')) base.pop_back();
  auto doc = co_await fetch_(base + "/.well-known/openid-configuration", is.cfg);
  if (!doc) co_return idp_down(is.cfg, "discovery: " + doc.err().message);
  if (doc->result_int() != 200) co_return idp_down(is.cfg, "discovery answered " + std::to_string(doc->result_int()));
  json d = json::parse(doc->body(), nullptr, false);
  if (!d.is_object() || !d.contains("issuer") || d["issuer"] != is.cfg.issuer)
    co_return idp_down(is.cfg, "discovery: the document does not name this issuer");
  is.discovered = std::move(d);
  co_return ok_t{};
}

// One discovery fetch per issuer at a time, its document kept for jwks_default_cache_s and a
// failure for jwks_min_refresh_s: a provider that is down is asked once per interval, however
// many sign-ins and tokens come meanwhile.
awaitable<result<json>> oidc_verifier::discover(issuer_state& is) {
  if (is.discovering) {
    auto [ec] = co_await is.discovering->async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;  // cancelled when the fetch ends: that is the signal
  } else if (clk_.now() >= is.discovery_until) {
    is.discovering.emplace(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
    is.discovery_outcome = co_await fetch_discovery(is);
    is.discovery_until = clk_.now() + std::chrono::seconds(is.discovery_outcome ? cfg_.jwks_default_cache_s
                                                                                 : cfg_.jwks_min_refresh_s);
    is.discovering.reset();  // its waiters resume, cancelled
  }
  if (!is.discovery_outcome) co_return is.discovery_outcome.err();
  co_return *is.discovered;
}

awaitable<result<json>> oidc_verifier::discovery(const std::string& issuer) {
  auto found = std::find_if(issuers_.begin(), issuers_.end(), [&](const auto& is) { return is->cfg.issuer == issuer; });
  if (found == issuers_.end()) co_return make_error(errc::invalid_argument, "issuer '" + issuer + "' is not configured");
  co_return co_await discover(**found);
}

// The issuer's key set, fetched now: discovery first when its JWKS URI is not known.
awaitable<result<void>> oidc_verifier::fetch_keys(issuer_state& is) {
  if (is.jwks_uri.empty()) {
    auto d = co_await discover(is);
    if (!d) co_return std::move(d).err();
    if (!d->contains("jwks_uri") || !(*d)["jwks_uri"].is_string())
      co_return idp_down(is.cfg, "discovery document names no jwks_uri");
    is.jwks_uri = (*d)["jwks_uri"].get<std::string>();
  }
  ++jwks_fetches_;
  auto res = co_await fetch_(is.jwks_uri, is.cfg);
  if (!res || res->result_int() != 200) {
    if (is.cfg.jwks_uri.empty()) {  // discover again next time: it may have moved
      is.jwks_uri.clear();
      is.discovery_until = {};
    }
    co_return idp_down(is.cfg, res ? "JWKS answered " + std::to_string(res->result_int()) : res.err().message);
  }
  auto parsed = jwt::parse_jwks(res->body());
  if (!parsed) co_return idp_down(is.cfg, "JWKS: " + parsed.err().message);
  if (parsed->skipped > 0)
    spdlog::info("oidc: {} key(s) of {} skipped (not usable for signatures)", parsed->skipped, is.cfg.issuer);
  is.keys = std::move(parsed->keys);
  is.fresh_until = clk_.now() + cache_lifetime(*res, cfg_);
  co_return ok_t{};
}

// One fetch per issuer at a time: whoever comes while it runs waits for its outcome.
awaitable<result<void>> oidc_verifier::refresh(issuer_state& is) {
  if (is.fetched) {
    auto [ec] = co_await is.fetched->async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;  // cancelled when the fetch ends: that is the signal
    co_return is.last_outcome;
  }
  // The timer lives as long as this fetch, on this fetch's executor: one kept for good would
  // outlive the io_context of whoever asked first (found by the unit tests under UBSan).
  is.fetched.emplace(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  is.last_attempt = clk_.now();
  is.last_outcome = co_await fetch_keys(is);
  is.fetched.reset();  // its waiters resume, cancelled
  if (!is.last_outcome) spdlog::warn("oidc: {}", is.last_outcome.err().message);
  co_return is.last_outcome;
}

awaitable<result<principal>> oidc_verifier::authenticate(std::string token, std::string request_id) {
  auto verified = co_await verify_access_token(std::move(token), std::move(request_id));
  if (!verified) co_return std::move(verified).err();
  co_return std::move(verified->who);
}

awaitable<result<verified_access>> oidc_verifier::verify_access_token(std::string token, std::string request_id) {
  if (token.size() > static_cast<std::size_t>(cfg_.max_token_bytes)) {
    spdlog::warn("auth: token refused ({}): token of {} bytes is over the limit", request_id, token.size());
    co_return refused();
  }
  auto claimed_issuer = jwt::peek_issuer(token);
  if (!claimed_issuer) {
    spdlog::warn("auth: token refused ({}): not a JWT with an iss claim", request_id);
    co_return refused();
  }
  auto found = std::find_if(issuers_.begin(), issuers_.end(),
                            [&](const auto& is) { return is->cfg.issuer == *claimed_issuer; });
  if (found == issuers_.end()) {
    spdlog::warn("auth: token refused ({}): issuer '{}' is not configured", request_id, loggable(*claimed_issuer));
    co_return refused();
  }
  issuer_state& is = **found;
  auto verified = co_await verify_signed(is, token, is.policy, request_id);
  if (!verified) co_return std::move(verified).err();
  auto p = to_principal(is, verified->all, verified->subject);
  if (!p) {
    spdlog::warn("auth: token of {} (subject {}) refused ({}): {}", is.cfg.issuer, loggable(verified->subject),
                 request_id, p.err().message);
    if (p.err().code == errc::unauthenticated) co_return refused();
    co_return std::move(p).err();
  }
  co_return verified_access{std::move(*p), verified->expires_at};
}

awaitable<result<nlohmann::json>> oidc_verifier::verify_id_token(std::string issuer, std::string token,
                                                                 std::string client_id, std::string request_id) {
  auto found =
      std::find_if(issuers_.begin(), issuers_.end(), [&](const auto& is) { return is->cfg.issuer == issuer; });
  if (found == issuers_.end()) {
    spdlog::warn("auth: ID token refused ({}): issuer '{}' is not configured", request_id, loggable(issuer));
    co_return refused();
  }
  issuer_state& is = **found;
  // The issuer's own rules, but for the client: an ID token's audience is the client id.
  jwt::policy policy = is.policy;
  policy.audiences = {std::move(client_id)};
  auto verified = co_await verify_signed(is, token, policy, request_id);
  if (!verified) co_return std::move(verified).err();
  co_return std::move(verified->all);
}

bool oidc_verifier::offers_console_sign_in(const std::string& issuer) const {
  return std::any_of(issuers_.begin(), issuers_.end(),
                     [&](const auto& is) { return is->cfg.issuer == issuer && !is->cfg.console_client_id.empty(); });
}

awaitable<result<jwt::claims>> oidc_verifier::verify_signed(issuer_state& is, const std::string& token,
                                                            const jwt::policy& policy, const std::string& request_id) {
  auto refuse = [&](const std::string& why) {
    spdlog::warn("auth: token refused ({}): {}", request_id, why);
    return refused();
  };
  auto parsed = jwt::parse(token, policy);
  if (!parsed) co_return refuse(parsed.err().message);

  const time_point now = clk_.now();
  const bool may_ask = !is.last_attempt || now - *is.last_attempt >= std::chrono::seconds(cfg_.jwks_min_refresh_s);
  bool asked = false;
  if (!is.keys || now >= is.fresh_until) {
    // Stale or never fetched: ask (a failure within the refresh interval is not retried).
    if (!may_ask && !is.last_outcome) {
      spdlog::warn("auth: token refused ({}): {}", request_id, is.last_outcome.err().message);
      co_return is.last_outcome.err();
    }
    if (auto r = co_await refresh(is); !r) co_return std::move(r).err();
    asked = true;
  }
  const jwt::key* key = is.keys->find(parsed->kid);
  if (!key && may_ask && !asked) {
    // An unknown kid may be a rotation at the issuer: ask once per interval, not per token.
    if (auto r = co_await refresh(is); !r) co_return std::move(r).err();
    key = is.keys->find(parsed->kid);
  }
  if (!key) co_return refuse("kid '" + loggable(parsed->kid) + "' is not in the key set of " + is.cfg.issuer);

  auto verified = jwt::verify(*parsed, *key, policy, clk_.now());
  if (!verified) co_return refuse(verified.err().message);
  co_return std::move(*verified);
}

// The verified claims → organization and role, by the issuer's configuration.
result<principal> oidc_verifier::to_principal(const issuer_state& is, const json& claims, const std::string& subject) {
  std::string org_name = is.cfg.org;
  if (!is.cfg.org_claim.empty()) {
    const json* v = claim(claims, is.cfg.org_claim);
    if (!v || !v->is_string() || v->get<std::string>().empty())
      return make_error(errc::unauthenticated, "the token has no " + is.cfg.org_claim + " claim naming an organization");
    org_name = v->get<std::string>();
  }
  auto o = active_org(db_, org_name, true);
  if (!o) return std::move(o).err();

  std::optional<role> granted;
  if (!is.cfg.default_role.empty()) granted = *parse_role(is.cfg.default_role);
  auto grant = [&](const json& value) {
    if (!value.is_string()) return;
    auto mapped = is.cfg.role_map.find(value.get<std::string>());
    if (mapped == is.cfg.role_map.end()) return;
    role r = *parse_role(mapped->second);
    if (!granted || r > *granted) granted = r;
  };
  if (!is.cfg.role_claim.empty()) {
    if (const json* v = claim(claims, is.cfg.role_claim)) {
      if (v->is_array())
        for (const auto& e : *v) grant(e);
      else
        grant(*v);
    }
  }
  if (!granted) return make_error(errc::permission_denied, "your identity provider grants you no role in " + o->name);

  principal p = acting_in(*o, *granted, method::oidc);
  p.issuer = is.cfg.issuer;
  p.id = subject;
  p.name = subject;
  for (const std::string& name : {is.cfg.name_claim, std::string("preferred_username"), std::string("client_id")})
    if (const json* v = name.empty() ? nullptr : claim(claims, name); v && v->is_string() && !v->get<std::string>().empty()) {
      p.name = v->get<std::string>();
      break;
    }
  return p;
}

awaitable<result<principal>> authenticator::authenticate(std::string authorization, std::string request_id) {
  // The console's cookie, as the API's guard passes it on (console_sessions.hpp).
  if (authorization.starts_with(console_scheme)) {
    console_issuer_check offered = [this](const std::string& issuer) {
      return oidc_ != nullptr && oidc_->offers_console_sign_in(issuer);
    };
    co_return authenticate_console(db_, clk_, authorization.substr(console_scheme.size()), offered);
  }
  auto token = bearer_token(authorization);
  if (!token) co_return std::move(token).err();
  if (is_api_key(*token) || !oidc_ || !oidc_->enabled()) co_return auth::authenticate(db_, clk_, authorization, &keys_);
  co_return co_await oidc_->authenticate(std::move(*token), std::move(request_id));
}

}  // namespace sandfort::auth
