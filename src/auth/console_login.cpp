#include "sandfort/auth/console_login.hpp"

#include <algorithm>
#include <cctype>
#include <spdlog/spdlog.h>

#include "sandfort/auth/code_flow.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/core/loggable.hpp"
#include "sandfort/crypto/digest.hpp"
#include "sandfort/http/url_client.hpp"
#include "sandfort/store/console_session_store.hpp"

namespace sandfort::auth {

namespace asio = boost::asio;
using asio::awaitable;
using nlohmann::json;

namespace {

constexpr std::size_t state_bytes = 32;     // 64 hex characters in the URL
constexpr std::size_t browser_bytes = 32;   // the pre-login cookie
constexpr std::size_t verifier_bytes = 32;  // 64 hex characters: a valid PKCE verifier (RFC 7636 4.1)
constexpr std::size_t nonce_bytes = 16;

bool is_hex_of(std::string_view s, std::size_t bytes) {
  return s.size() == bytes * 2 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Where the browser is sent (the authorization endpoint) and where sandfortd posts (the token
// endpoint) must be https, or plain http on this machine only, as for every fetch of a provider.
bool is_endpoint(const json& d, const char* name) {
  if (!d.contains(name) || !d[name].is_string()) return false;
  auto parts = http::parse_url(d[name].get<std::string>());
  return parts && (parts->scheme == "https" || is_loopback_host(parts->host));
}

// The error the callback ends with: a login_error code for the page, the reason for the log.
error refusal(errc code, const char* login_code, const std::string& why, const std::string& request_id) {
  spdlog::warn("console: sign-in refused ({}): {}", request_id, why);
  return make_error(code, login_code);
}

// A verifier's refusal, as the page names it.
const char* login_code_of(const error& e) {
  switch (e.code) {
    case errc::unauthenticated: return login_error::token_refused;
    case errc::permission_denied: return login_error::no_access;
    case errc::idp_unavailable:
    case errc::unavailable: return login_error::provider_unavailable;
    default: return login_error::internal;
  }
}

}  // namespace

bool is_login_error(std::string_view code) {
  for (const char* known : {login_error::cancelled, login_error::provider_error, login_error::bad_callback,
                            login_error::expired, login_error::wrong_browser, login_error::issuer_mismatch,
                            login_error::token_exchange, login_error::token_refused, login_error::no_access,
                            login_error::provider_unavailable, login_error::busy, login_error::internal})
    if (code == known) return true;
  return false;
}

console_login::console_login(const oidc_config& cfg, oidc_verifier& verifier, store::database& db, const clock& clk,
                             form_poster post, console_login_limits limits)
    : cfg_(cfg),
      verifier_(verifier),
      db_(db),
      clk_(clk),
      post_(std::move(post)),
      limits_(limits) {}

console_login::~console_login() = default;

std::vector<console_issuer> console_login::issuers() const {
  std::vector<console_issuer> out;
  for (const auto& is : cfg_.issuers)
    if (!is.console_client_id.empty())
      out.push_back({code_flow::issuer_key(is.issuer),
                     is.console_name.empty() ? code_flow::host_of(is.issuer) : is.console_name});
  return out;
}

const oidc_issuer_config* console_login::console_issuer_config(const std::string& issuer) const {
  for (const auto& is : cfg_.issuers)
    if (is.issuer == issuer && !is.console_client_id.empty()) return &is;
  return nullptr;
}

// The provider's endpoints, from the discovery document the verifier keeps (one fetch per issuer
// at a time, a failure remembered for jwks_min_refresh_s): https, and PKCE S256 if it lists methods.
awaitable<result<console_login::provider>> console_login::endpoints(const oidc_issuer_config& is,
                                                                    const std::string& request_id) {
  auto doc = co_await verifier_.discovery(is.issuer);
  auto unavailable = [&](const std::string& why) {
    return refusal(errc::idp_unavailable, login_error::provider_unavailable, why, request_id);
  };
  if (!doc) co_return unavailable(doc.err().message);
  const json& d = *doc;
  if (!is_endpoint(d, "authorization_endpoint") || !is_endpoint(d, "token_endpoint"))
    co_return unavailable("identity provider " + is.issuer + ": no https authorization_endpoint and token_endpoint");
  // A provider that lists its PKCE methods without S256 would ignore the challenge.
  if (d.contains("code_challenge_methods_supported")) {
    const json& m = d["code_challenge_methods_supported"];
    if (!m.is_array() || std::find(m.begin(), m.end(), json("S256")) == m.end())
      co_return unavailable("identity provider " + is.issuer + ": PKCE with S256 is not supported");
  }
  provider p;
  p.authorization_endpoint = d["authorization_endpoint"].get<std::string>();
  p.token_endpoint = d["token_endpoint"].get<std::string>();
  const char* sends_iss = "authorization_response_iss_parameter_supported";
  p.sends_iss = d.contains(sends_iss) && d[sends_iss].is_boolean() && d[sends_iss].get<bool>();
  co_return p;
}

awaitable<result<login_redirect>> console_login::start(std::string issuer_id, std::string redirect_uri,
                                                       std::string source, std::string request_id) {
  const oidc_issuer_config* is = nullptr;
  for (const auto& c : cfg_.issuers)
    if (!c.console_client_id.empty() && code_flow::issuer_key(c.issuer) == issuer_id) is = &c;
  if (!is) co_return invalid_argument("no identity provider offers console sign-in as '" + loggable(issuer_id) + "'");
  auto p = co_await endpoints(*is, request_id);
  if (!p) co_return std::move(p).err();

  store::console_session_store rows(db_);
  const time_point now = clk_.now();
  auto live = rows.count_pending_logins(format_time(now));
  if (!live) co_return refusal(live.err().code, login_error::internal, live.err().message, request_id);
  // Anyone may begin a sign-in: the table is bounded per address (the oldest end) and in all.
  if (static_cast<std::size_t>(*live) >= limits_.pending_total)
    co_return refusal(errc::rate_limited, login_error::busy,
                      std::to_string(*live) + " sign-ins under way, the most there may be", request_id);

  const std::string state = random_hex(state_bytes);
  const std::string browser = random_hex(browser_bytes);
  const std::string verifier = random_hex(verifier_bytes);
  const std::string nonce = random_hex(nonce_bytes);
  const store::pending_login row{sha256_hex(browser), is->issuer, redirect_uri,
                                 verifier,            nonce,      source,
                                 format_time(now),    format_time(now + limits_.pending_lifetime)};
  {
    // The row and the trimming of its source's oldest together, or neither.
    auto tx = db_.begin();
    if (!tx) co_return refusal(tx.err().code, login_error::internal, tx.err().message, request_id);
    if (auto added = rows.add_pending_login(sha256_hex(state), row, limits_.pending_per_source); !added)
      co_return refusal(added.err().code, login_error::internal, added.err().message, request_id);
    if (auto committed = tx->commit(); !committed)
      co_return refusal(committed.err().code, login_error::internal, committed.err().message, request_id);
  }

  std::string scope;
  for (const auto& s : is->console_scopes) scope += (scope.empty() ? "" : " ") + s;
  auto location = code_flow::with_query(p->authorization_endpoint,
                                        {{"response_type", "code"},
                                         {"client_id", is->console_client_id},
                                         {"redirect_uri", redirect_uri},
                                         {"scope", scope},
                                         {"state", state},
                                         {"nonce", nonce},
                                         {"code_challenge", code_flow::pkce_challenge(verifier)},
                                         {"code_challenge_method", "S256"}});
  if (!location)
    co_return refusal(errc::idp_unavailable, login_error::provider_unavailable,
                      is->issuer + ": " + location.err().message, request_id);
  co_return login_redirect{std::move(*location), browser};
}

// The token request (RFC 6749 4.1.3, RFC 7636 4.5): the code, the redirect URI it was asked for
// with, and the verifier; the client authenticated as configured.
awaitable<result<json>> console_login::redeem(const oidc_issuer_config& is, const provider& p, const std::string& code,
                                              const std::string& redirect_uri, const std::string& verifier,
                                              const std::string& request_id) {
  code_flow::fields form{{"grant_type", "authorization_code"},
                         {"code", code},
                         {"redirect_uri", redirect_uri},
                         {"code_verifier", verifier}};
  std::string authorization;
  if (is.console_client_secret.empty() || is.console_client_auth == "client_secret_post")
    form.emplace_back("client_id", is.console_client_id);
  if (!is.console_client_secret.empty()) {
    if (is.console_client_auth == "client_secret_post")
      form.emplace_back("client_secret", is.console_client_secret);
    else
      authorization = code_flow::basic_credentials(is.console_client_id, is.console_client_secret);
  }
  std::string body = code_flow::form_encode(form);
  std::string url = p.token_endpoint;
  auto res = co_await post_(std::move(url), std::move(body), std::move(authorization), is);
  if (!res)
    co_return refusal(errc::idp_unavailable, login_error::provider_unavailable,
                      is.issuer + ": token endpoint: " + res.err().message, request_id);
  const json answer = json::parse(res->body(), nullptr, false);
  if (res->result_int() != 200) {
    // The provider's own error code is worth logging; its description is not worth echoing anywhere.
    std::string code_named = answer.is_object() && answer.contains("error") && answer["error"].is_string()
                                 ? answer["error"].get<std::string>()
                                 : "";
    co_return refusal(errc::unauthenticated, login_error::token_exchange,
                      is.issuer + ": token endpoint answered " + std::to_string(res->result_int()) + " " +
                          loggable(code_named),
                      request_id);
  }
  auto text = [&](const char* k) {
    return answer.is_object() && answer.contains(k) && answer[k].is_string() ? answer[k].get<std::string>() : "";
  };
  std::string type = text("token_type");
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (text("access_token").empty() || type != "bearer")
    co_return refusal(errc::unauthenticated, login_error::token_exchange,
                      is.issuer + ": the token answer has no bearer access_token", request_id);
  co_return answer;
}

awaitable<result<proven_identity>> console_login::finish(login_callback cb, std::string request_id) {
  using namespace login_error;
  auto refuse = [&](const char* code, const std::string& why) {
    return refusal(errc::unauthenticated, code, why, request_id);
  };
  if (!is_hex_of(cb.state, state_bytes)) co_return refuse(bad_callback, "the callback has no state of ours");
  // Taken out before anything else is looked at: a state is good for one callback.
  auto pending = store::console_session_store(db_).take_pending_login(sha256_hex(cb.state));
  if (!pending) {
    if (pending.err().code != errc::not_found)
      co_return refusal(pending.err().code, internal, pending.err().message, request_id);
    co_return refuse(expired, "no sign-in under way for this state (used already, expired, or never begun)");
  }
  time_point until;
  if (!parse_time(pending->expires_at, until) || clk_.now() >= until)
    co_return refuse(expired, "the sign-in began at " + pending->created_at + ", too long ago");
  // The browser that comes back must be the one that began: else an attacker's own code and state,
  // planted in a victim's browser, would sign the victim in as the attacker (login CSRF).
  if (cb.browser_secret.empty() || !constant_time_equal(sha256_hex(cb.browser_secret), pending->browser_sha256))
    co_return refuse(wrong_browser, cb.browser_secret.empty() ? "the browser sent no pre-login cookie"
                                                              : "the pre-login cookie is not the one that began it");
  const oidc_issuer_config* is = console_issuer_config(pending->issuer);
  if (!is) co_return refuse(provider_error, pending->issuer + " no longer offers console sign-in");
  if (!cb.error.empty())
    co_return refusal(errc::permission_denied, cb.error == "access_denied" ? cancelled : provider_error,
                      is->issuer + " answered error " + loggable(cb.error), request_id);
  auto p = co_await endpoints(*is, request_id);
  if (!p) co_return std::move(p).err();
  // RFC 9207: a provider that says it names itself must, and the name must be the one we asked.
  const bool wrong_iss = cb.iss.empty() ? p->sends_iss : cb.iss != is->issuer;
  if (wrong_iss)
    co_return refuse(issuer_mismatch, "the callback names issuer '" + loggable(cb.iss) + "', not " + is->issuer);
  if (cb.code.empty() || cb.code.size() > limits_.max_code_bytes)
    co_return refuse(bad_callback, "the callback has no code, or one over " + std::to_string(limits_.max_code_bytes) +
                                       " bytes");

  auto tokens = co_await redeem(*is, *p, cb.code, pending->redirect_uri, pending->code_verifier, request_id);
  if (!tokens) co_return std::move(tokens).err();
  const json& answer = *tokens;
  if (!answer.contains("id_token") || !answer["id_token"].is_string())
    co_return refuse(token_refused, is->issuer + ": the token answer has no id_token (is openid in console_scopes?)");
  std::string id_token = answer["id_token"].get<std::string>();
  auto id = co_await verifier_.verify_id_token(is->issuer, std::move(id_token), is->console_client_id, request_id);
  if (!id) co_return refusal(id.err().code, login_code_of(id.err()), is->issuer + ": the ID token", request_id);
  // The nonce ties the ID token to this very sign-in; azp, when present, to this client.
  if (!id->contains("nonce") || (*id)["nonce"] != pending->nonce)
    co_return refuse(token_refused, is->issuer + ": the ID token's nonce is not this sign-in's");
  if (id->contains("azp") && (*id)["azp"] != is->console_client_id)
    co_return refuse(token_refused, is->issuer + ": the ID token was issued to another client");

  std::string access_token = answer["access_token"].get<std::string>();
  auto access = co_await verifier_.verify_access_token(std::move(access_token), request_id);
  if (!access)
    co_return refusal(access.err().code, login_code_of(access.err()), is->issuer + ": the access token", request_id);
  if (access->who.issuer != is->issuer)
    co_return refuse(token_refused, "the access token is " + access->who.issuer + "'s, not " + is->issuer + "'s");
  co_return proven_identity{std::move(access->who), access->expires_at};
}

}  // namespace sandfort::auth
