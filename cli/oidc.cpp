#include "oidc.hpp"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>

#include "failure.hpp"
#include "web_fetch.hpp"

namespace sandfort::cli::oidc {
using nlohmann::json;

namespace {

const char* const device_grant_type = "urn:ietf:params:oauth:grant-type:device_code";

std::int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string strip_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// What the issuer sends is printed on the user's terminal: no escape sequences get through.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  return out;
}

std::string string_field(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// A JSON object answer, or a failure naming what was asked.
json json_answer(const web_answer& a, const std::string& what) {
  auto j = json::parse(a.body, nullptr, false);
  if (!j.is_object())
    throw failure(what + " answered HTTP " + std::to_string(a.status) + " with something that is not a JSON object");
  return j;
}

// The issuer's error answer as "code: description".
std::string oauth_error(const json& j, unsigned status) {
  std::string code = string_field(j, "error");
  std::string text = code.empty() ? "HTTP " + std::to_string(status) : code;
  if (auto d = string_field(j, "error_description"); !d.empty()) text += ": " + d;
  return printable(text);
}

web_answer post_form(const std::string& url, const std::vector<std::pair<std::string, std::string>>& fields,
                     const std::string& what) {
  web_request req;
  req.method = "POST";
  req.url = url;
  req.body = form_encode(fields);
  req.content_type = "application/x-www-form-urlencoded";
  return web_fetch(req, what);
}

void add_target(std::vector<std::pair<std::string, std::string>>& fields, const std::string& resource,
                const std::string& audience) {
  if (!resource.empty()) fields.emplace_back("resource", resource);
  if (!audience.empty()) fields.emplace_back("audience", audience);
}

tokens tokens_from(const json& j) {
  tokens t;
  t.access_token = string_field(j, "access_token");
  if (t.access_token.empty()) throw failure("the identity provider's token answer has no access_token");
  std::string type = string_field(j, "token_type");
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  if (type != "bearer") throw failure("the identity provider issued a \"" + printable(type) + "\" token, not a bearer token");
  t.refresh_token = string_field(j, "refresh_token");
  if (j.contains("expires_in") && j["expires_in"].is_number() && j["expires_in"].get<double>() > 0)
    t.expires_at = now_s() + static_cast<std::int64_t>(j["expires_in"].get<double>());
  return t;
}

struct device_authorization {
  std::string device_code;
  std::string user_code;
  std::string verification_uri;
  std::string verification_uri_complete;
  std::int64_t expires_in = 0;
  std::int64_t interval = 5;  // RFC 8628 §3.2: 5 s when the issuer does not say
};

device_authorization start_device_flow(const endpoints& ep, const grant_options& o) {
  std::vector<std::pair<std::string, std::string>> fields = {{"client_id", o.client_id}};
  if (!o.scope.empty()) fields.emplace_back("scope", o.scope);
  add_target(fields, o.resource, o.audience);
  web_answer a = post_form(ep.device_authorization_endpoint, fields, "the device authorization endpoint");
  json j = json_answer(a, "the device authorization endpoint");
  if (a.status != 200) throw failure("the identity provider refused to start the sign-in (" + oauth_error(j, a.status) + ")");
  device_authorization d;
  d.device_code = string_field(j, "device_code");
  d.user_code = printable(string_field(j, "user_code"));
  d.verification_uri = printable(string_field(j, "verification_uri"));
  if (d.verification_uri.empty()) d.verification_uri = printable(string_field(j, "verification_url"));  // Google's name
  d.verification_uri_complete = printable(string_field(j, "verification_uri_complete"));
  if (d.device_code.empty() || d.user_code.empty() || d.verification_uri.empty())
    throw failure("the device authorization answer lacks device_code, user_code or verification_uri");
  if (j.contains("expires_in") && j["expires_in"].is_number()) d.expires_in = j["expires_in"].get<std::int64_t>();
  if (d.expires_in <= 0) d.expires_in = 600;
  if (j.contains("interval") && j["interval"].is_number()) d.interval = std::max<std::int64_t>(1, j["interval"].get<std::int64_t>());
  return d;
}

void tell_user(const device_authorization& d, std::ostream& out) {
  if (!d.verification_uri_complete.empty()) {
    out << "To sign in, open " << d.verification_uri_complete << " in a browser\n"
        << "and check that it shows the code " << d.user_code << " (or open " << d.verification_uri
        << " and enter the code).\n";
  } else {
    out << "To sign in, open " << d.verification_uri << " in a browser and enter the code " << d.user_code << "\n";
  }
  out << "Waiting for the sign-in (the code expires in " << (d.expires_in + 59) / 60 << " min)...\n" << std::flush;
}

}  // namespace

endpoints discover(const std::string& issuer_url) {
  std::string issuer = strip_slash(issuer_url);
  parse_idp_url(issuer, "the issuer URL");
  web_request req;
  req.url = issuer + "/.well-known/openid-configuration";
  web_answer a = web_fetch(req, "the issuer's discovery document");
  if (a.status != 200)
    throw failure("the issuer's discovery document (" + req.url + ") answered HTTP " + std::to_string(a.status) +
                  ": is " + issuer + " an OpenID Connect issuer?");
  json doc = json_answer(a, "the issuer's discovery document");
  endpoints ep;
  ep.issuer = string_field(doc, "issuer");
  // OpenID Connect Discovery §4.3: a document for another issuer is not this issuer's.
  if (strip_slash(ep.issuer) != issuer)
    throw failure("the discovery document at " + req.url + " names the issuer \"" + printable(ep.issuer) +
                  "\", not " + issuer);
  ep.device_authorization_endpoint = string_field(doc, "device_authorization_endpoint");
  ep.token_endpoint = string_field(doc, "token_endpoint");
  ep.revocation_endpoint = string_field(doc, "revocation_endpoint");
  if (ep.device_authorization_endpoint.empty())
    throw failure("the issuer " + issuer + " does not offer the device authorization grant (no "
                  "device_authorization_endpoint in its discovery document)");
  if (ep.token_endpoint.empty()) throw failure("the issuer " + issuer + " names no token_endpoint");
  parse_idp_url(ep.device_authorization_endpoint, "the device authorization endpoint");
  parse_idp_url(ep.token_endpoint, "the token endpoint");
  if (!ep.revocation_endpoint.empty()) parse_idp_url(ep.revocation_endpoint, "the revocation endpoint");
  return ep;
}

tokens device_flow(const endpoints& ep, const grant_options& o, std::ostream& out) {
  device_authorization d = start_device_flow(ep, o);
  tell_user(d, out);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(d.expires_in);
  std::int64_t interval = d.interval;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::seconds(interval));
    if (std::chrono::steady_clock::now() >= deadline)
      throw failure("the code " + d.user_code + " expired before the sign-in was completed; run `sandfort login --oidc` again");
    std::vector<std::pair<std::string, std::string>> fields = {
        {"grant_type", device_grant_type}, {"device_code", d.device_code}, {"client_id", o.client_id}};
    web_answer a = post_form(ep.token_endpoint, fields, "the token endpoint");
    json j = json_answer(a, "the token endpoint");
    if (a.status == 200) return tokens_from(j);
    std::string code = string_field(j, "error");
    if (code == "authorization_pending") continue;
    if (code == "slow_down") {
      interval += 5;  // RFC 8628 §3.5: and keep the longer interval from now on
      continue;
    }
    if (code == "expired_token")
      throw failure("the code " + d.user_code + " expired before the sign-in was completed; run `sandfort login --oidc` again");
    if (code == "access_denied") throw failure("the sign-in was denied at the identity provider (" + oauth_error(j, a.status) + ")");
    throw failure("the identity provider refused the sign-in (" + oauth_error(j, a.status) + ")");
  }
}

tokens refresh(const oidc_session& s) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"grant_type", "refresh_token"}, {"refresh_token", s.refresh_token}, {"client_id", s.client_id}};
  add_target(fields, s.resource, s.audience);
  web_answer a = post_form(s.token_endpoint, fields, "the token endpoint");
  json j = json_answer(a, "the token endpoint");
  if (a.status != 200) {
    std::string again = "run `sandfort login --oidc " + s.issuer + " --client-id " + s.client_id + "` again";
    if (string_field(j, "error") == "invalid_grant")
      throw failure("the sign-in at " + s.issuer + " has expired or was revoked (" + oauth_error(j, a.status) + "); " + again);
    throw failure("renewing the access token at " + s.issuer + " failed (" + oauth_error(j, a.status) + "); " + again);
  }
  tokens t = tokens_from(j);
  // An issuer that does not rotate refresh tokens answers without one: the old one stays good.
  if (t.refresh_token.empty()) t.refresh_token = s.refresh_token;
  return t;
}

std::string revoke(const oidc_session& s) {
  if (s.refresh_token.empty()) return "there is no refresh token";
  if (s.revocation_endpoint.empty()) return "the issuer offers no revocation endpoint";
  try {
    web_request req;
    req.method = "POST";
    req.url = s.revocation_endpoint;
    req.content_type = "application/x-www-form-urlencoded";
    req.body = form_encode({{"token", s.refresh_token}, {"token_type_hint", "refresh_token"}, {"client_id", s.client_id}});
    req.deadline = std::chrono::seconds(10);
    web_answer a = web_fetch(req, "the revocation endpoint");
    if (a.status == 200) return "";
    auto j = json::parse(a.body, nullptr, false);
    return "the issuer answered " + (j.is_object() ? oauth_error(j, a.status) : "HTTP " + std::to_string(a.status));
  } catch (const failure& e) {
    return e.what();
  }
}

}  // namespace sandfort::cli::oidc
