#include "sandfort/auth/keys.hpp"

#include <cctype>
#include <stdexcept>
#include <string_view>

#include "sandfort/core/ids.hpp"

namespace sandfort::auth {

namespace {

constexpr std::string_view secret_prefix = "sfk_";
constexpr std::size_t secret_random_bytes = 16;
constexpr std::size_t max_key_name = 100;
// Far beyond any sensible key lifetime, and well inside what a time_point can hold.
constexpr long long max_expires_in_s = 100LL * 366 * 24 * 3600;

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

constexpr auto last_used_resolution = std::chrono::seconds(60);

}  // namespace

// An error that never repeats what was sent.
result<std::string> bearer_token(const std::string& authorization) {
  std::string_view rest = trim(authorization);
  if (rest.empty()) return unauthenticated("missing API key");
  std::size_t gap = 0;
  while (gap < rest.size() && !is_space(rest[gap])) ++gap;
  std::string_view scheme = rest.substr(0, gap);
  std::string_view token = trim(rest.substr(gap));
  // A key pasted without its scheme (`Authorization: sfk_…`) is the usual mistake: name the form.
  if (!iequals(scheme, "bearer")) return unauthenticated("the Authorization header must be \"Bearer <API key>\"");
  if (token.empty()) return unauthenticated("missing API key");
  return std::string(token);
}

bool is_api_key(std::string_view token) { return token.starts_with(secret_prefix); }

namespace {

result<void> may_act(const store::org& o) {
  if (o.state == "disabled") return make_error(errc::permission_denied, "organization " + o.name + " is disabled");
  if (o.state != "active") return make_error(errc::unauthenticated, "organization " + o.name + " is deleted");
  return {};
}

}  // namespace

result<store::org> active_org(store::org_store orgs, const std::string& org_id_or_name, bool by_name) {
  auto o = by_name ? orgs.find_org_by_name(org_id_or_name) : orgs.get_org(org_id_or_name);
  if (!o) {
    if (o.err().code == errc::not_found) return unauthenticated("organization not found");
    return std::move(o).err();
  }
  if (auto ok = may_act(*o); !ok) return std::move(ok).err();
  return o;
}

std::string to_string(method m) { return m == method::oidc ? "oidc" : "api_key"; }

result<role> parse_role(const std::string& s) {
  if (s == "viewer") return role::viewer;
  if (s == "member") return role::member;
  if (s == "admin") return role::admin;
  return make_error(errc::invalid_argument, "unknown role '" + s + "' (valid: admin, member, viewer)");
}

std::string to_string(role r) {
  switch (r) {
    case role::viewer: return "viewer";
    case role::member: return "member";
    case role::admin: return "admin";
  }
  return "viewer";
}

bool allows(role r, bool superadmin_org, permission p) {
  switch (p) {
    case permission::read: return true;
    case permission::use_sandboxes: return r == role::member || r == role::admin;
    case permission::manage_org: return r == role::admin;
    case permission::superadmin: return r == role::admin && superadmin_org;
  }
  return false;
}

std::string new_secret() { return std::string(secret_prefix) + random_hex(secret_random_bytes); }

result<issued_key> issue_key(store::org_store orgs, const clock& clk, const std::string& org_id,
                             const std::string& name, role r, long long expires_in_s) {
  if (name.empty() || name.size() > max_key_name)
    return make_error(errc::invalid_argument, "key name must be 1 to 100 characters");
  if (expires_in_s > max_expires_in_s)
    return make_error(errc::invalid_argument, "expires_in_s must be at most " + std::to_string(max_expires_in_s));

  const time_point now = clk.now();
  issued_key out;
  out.secret = new_secret();
  out.record.id = new_id("key-");
  out.record.org_id = org_id;
  out.record.name = name;
  out.record.role = to_string(r);
  out.record.created_at = format_time(now);
  if (expires_in_s > 0) out.record.expires_at = format_time(now + std::chrono::seconds(expires_in_s));
  if (auto stored = orgs.insert_api_key(out.record, sha256_hex(out.secret)); !stored)
    return std::move(stored).err();
  return out;
}

namespace {

// last_used_at to the minute: one write a minute per key, not one per request. A failed write
// (the database busy) costs the request nothing; the next use records it. On a full state disk
// it waits: reads must not spend the reserve that deletes need. `key` is told the time written.
void record_use(store::database& db, time_point now, store::api_key& key) {
  time_point last;
  if (key.last_used_at && parse_time(*key.last_used_at, last) && now - last < last_used_resolution) return;
  if (db.space().full) return;
  if (store::org_store(db).touch_api_key(key.id, format_time(now))) key.last_used_at = format_time(now);
}

// The checks of a key and its organization, on rows just read or kept by a key_cache.
result<principal> admit_key(const store::api_key& key, const store::org& o, time_point now) {
  if (key.revoked_at) return unauthenticated("API key revoked");
  if (key.expires_at) {
    time_point expires;
    // An unreadable expiry fails closed.
    if (!parse_time(*key.expires_at, expires) || expires <= now) return unauthenticated("API key expired");
  }
  auto key_role = parse_role(key.role);
  if (!key_role) return make_error(errc::internal, "API key " + key.id + " has " + key_role.err().message);
  // A key of an organization that is gone is just an invalid key.
  if (auto ok = may_act(o); !ok)
    return ok.err().code == errc::unauthenticated ? unauthenticated("invalid API key") : std::move(ok).err();
  principal p = acting_in(o, *key_role, method::api_key);
  p.id = key.id;
  p.name = key.name;
  return p;
}

}  // namespace

result<principal> authenticate(store::database& db, const clock& clk, const std::string& authorization,
                               key_cache* cache) {
  auto token = bearer_token(authorization);
  if (!token) return std::move(token).err();
  if (!is_id(*token, secret_prefix, secret_random_bytes * 2)) return unauthenticated("invalid API key");
  return authenticate_key_hash(db, clk, sha256_hex(*token), cache);
}

result<principal> authenticate_key_hash(store::database& db, const clock& clk, const std::string& key_sha256,
                                        key_cache* cache) {
  const time_point now = clk.now();
  if (key_rows* kept = cache ? cache->find(key_sha256, now) : nullptr) {
    auto p = admit_key(kept->key, kept->org, now);
    if (p) record_use(db, now, kept->key);
    return p;
  }
  const std::uint64_t generation = store::org_store::generation();  // before the reads: a change after them moves it
  store::org_store orgs(db);
  auto key = orgs.find_api_key_by_hash(key_sha256);
  if (!key) {
    if (key.err().code == errc::not_found) return unauthenticated("invalid API key");
    return std::move(key).err();  // the database failing is not the caller's fault
  }
  auto o = orgs.get_org(key->org_id);
  if (!o) return o.err().code == errc::not_found ? unauthenticated("invalid API key") : std::move(o).err();
  auto p = admit_key(*key, *o, now);
  if (!p) return p;
  record_use(db, now, *key);
  if (cache && !db.in_transaction()) cache->put(key_sha256, key_rows{std::move(*key), std::move(*o)}, generation, now);
  return p;
}

principal acting_in(const store::org& o, role granted, method via) {
  principal p;
  p.org_id = o.id;
  p.org_name = o.name;
  p.granted = granted;
  p.superadmin = o.superadmin && granted == role::admin;
  p.via = via;
  return p;
}

result<issued_key> bootstrap(store::org_store orgs, const clock& clk) {
  auto existing = orgs.find_org_by_name(store::operator_org_name);
  if (existing) return make_error(errc::conflict, "already bootstrapped");
  if (existing.err().code != errc::not_found) return std::move(existing).err();

  auto o = orgs.create_org(store::operator_org_name, true, format_time(clk.now()));
  if (!o) {
    // Another bootstrap won the race.
    if (o.err().code == errc::conflict) return make_error(errc::conflict, "already bootstrapped");
    return std::move(o).err();
  }
  return issue_key(orgs, clk, o->id, "bootstrap", role::admin, 0);
}

}  // namespace sandfort::auth
