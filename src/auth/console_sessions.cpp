#include "sandfort/auth/console_sessions.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "sandfort/auth/keys.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/crypto/digest.hpp"
#include "sandfort/store/console_session_store.hpp"
#include "sandfort/store/org_store.hpp"

namespace sandfort::auth {

namespace {

constexpr std::size_t cookie_bytes = 32;
constexpr std::size_t csrf_bytes = 16;

bool is_lower_hex(std::string_view s, std::size_t length) {
  if (s.size() != length) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

result<console_grant> open_console_session(store::database& db, const clock& clk, const console_session_options& o,
                                           const principal& who, const std::string& api_key) {
  if (who.via != method::api_key || !is_api_key(api_key))
    return make_error(errc::invalid_argument, "a console session is opened with an API key");
  const std::string key_sha256 = sha256_hex(api_key);
  auto key = store::org_store(db).find_api_key_by_hash(key_sha256);
  if (!key) return key.err().code == errc::not_found ? unauthenticated("invalid API key") : std::move(key).err();
  if (key->id != who.id) return unauthenticated("invalid API key");  // not the key that was checked

  const time_point now = clk.now();
  std::string expires_at = format_time(now + o.lifetime);
  // A session never outlives its key (ISO 8601 in UTC: the earlier one sorts first).
  if (key->expires_at && *key->expires_at < expires_at) expires_at = *key->expires_at;
  console_grant grant{random_hex(cookie_bytes), random_hex(csrf_bytes), expires_at};
  store::console_session s{"key:" + key_sha256, key_sha256, "", grant.csrf_token, format_time(now), expires_at};
  if (auto r = store::console_session_store(db).add_session(sha256_hex(grant.cookie), s, o.per_credential); !r)
    return std::move(r).err();
  return grant;
}

namespace {

// The principal as a provider's session keeps it: who, where, with which role. The organization
// is kept by id (a rename does not move the session) and read again on every request.
std::string identity_json(const principal& who) {
  return nlohmann::json{{"org_id", who.org_id}, {"role", to_string(who.granted)}, {"sub", who.id},
                        {"name", who.name},     {"issuer", who.issuer}}
      .dump();
}

result<principal> identity_principal(store::database& db, const std::string& identity,
                                     const console_issuer_check& issuer_offered) {
  const auto j = nlohmann::json::parse(identity, nullptr, false);
  auto text = [&](const char* k) -> std::string {
    if (!j.is_object() || !j.contains(k) || !j[k].is_string()) return "";
    return j[k].get<std::string>();
  };
  auto granted = parse_role(text("role"));
  if (!granted || text("sub").empty() || text("issuer").empty() || text("org_id").empty())
    return unauthenticated("console session of an unknown kind");
  // Taking an issuer out of the configuration (or its console sign-in) ends its sessions.
  if (!issuer_offered || !issuer_offered(text("issuer")))
    return unauthenticated("console session of an issuer no longer configured for console sign-in");
  auto o = active_org(db, text("org_id"), false);
  if (!o) return std::move(o).err();
  principal p = acting_in(*o, *granted, method::oidc);
  p.id = text("sub");
  p.name = text("name");
  p.issuer = text("issuer");
  return p;
}

}  // namespace

result<console_grant> open_identity_console_session(store::database& db, const clock& clk,
                                                    const console_session_options& o, const principal& who,
                                                    time_point token_expires_at) {
  if (who.via != method::oidc || who.issuer.empty() || who.id.empty())
    return make_error(errc::invalid_argument, "a console session through an identity provider needs its principal");
  const time_point now = clk.now();
  // Worth what the token was worth, and no longer: nothing checks with the provider afterwards.
  const time_point until = std::min(now + o.lifetime, token_expires_at);
  if (until <= now) return unauthenticated("the identity provider's token has expired");
  console_grant grant{random_hex(cookie_bytes), random_hex(csrf_bytes), format_time(until)};
  store::console_session s{"oidc:" + who.id + "@" + who.issuer, "", identity_json(who), grant.csrf_token,
                           format_time(now), grant.expires_at};
  if (auto r = store::console_session_store(db).add_session(sha256_hex(grant.cookie), s, o.per_credential); !r)
    return std::move(r).err();
  return grant;
}

result<principal> authenticate_console(store::database& db, const clock& clk, const std::string& cookie,
                                       const console_issuer_check& issuer_offered) {
  // Malformed values cost no query, and the error never repeats what was sent.
  if (!is_lower_hex(cookie, cookie_bytes * 2)) return unauthenticated("invalid console session");
  const std::string id = sha256_hex(cookie);
  auto s = store::console_session_store(db).find_session(id, format_time(clk.now()));
  if (!s) {
    if (s.err().code == errc::not_found) return unauthenticated("console session expired or signed out");
    return std::move(s).err();
  }
  auto who = !s->key_sha256.empty()  ? authenticate_key_hash(db, clk, s->key_sha256)
             : !s->identity.empty() ? identity_principal(db, s->identity, issuer_offered)
                                    : result<principal>(unauthenticated("console session of an unknown kind"));
  if (!who) return who;
  who->console_session = id;
  who->console_csrf = s->csrf_token;
  return who;
}

result<void> close_console_session(store::database& db, const principal& who) {
  if (who.console_session.empty()) return make_error(errc::invalid_argument, "not a console session");
  return store::console_session_store(db).remove_session(who.console_session);
}

std::string console_cookie_of(std::string_view header) {
  // The Secure name wins: a cookie set by plain HTTP on the same host cannot shadow it.
  for (const char* name : {console_cookie_secure, console_cookie})
    if (auto values = http::take_cookie(header, name).values; !values.empty()) return values.front();
  return {};
}

}  // namespace sandfort::auth
