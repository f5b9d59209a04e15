// Organizations and their API keys.
#include <algorithm>
#include <atomic>

#include "sandfort/core/ids.hpp"
#include "sandfort/store/org_store.hpp"
#include "statement.hpp"

namespace sandfort::store {

using detail::query;
using detail::sql;
using detail::statement;

namespace {

constexpr const char* org_columns = "id, name, superadmin, created_at, state, state_changed_at";

org read_org(const statement& st) {
  return org{st.column_text(0), st.column_text(1), st.column_int64(2) != 0,
             st.column_text(3), st.column_text(4), st.column_optional_text(5)};
}

constexpr const char* key_columns = "id, org_id, name, role, created_at, expires_at, revoked_at, last_used_at";

api_key read_key(const statement& st) {
  return api_key{st.column_text(0), st.column_text(1),          st.column_text(2),          st.column_text(3),
                 st.column_text(4), st.column_optional_text(5), st.column_optional_text(6), st.column_optional_text(7)};
}

// --- the statements of a request's path (explain_request_paths() shows their plans) ---

const std::string& api_key_by_hash_sql() {
  static const std::string q = sql("SELECT ", key_columns, " FROM api_keys WHERE secret_sha256 = ?1");
  return q;
}
const std::string& org_by_id_sql() {
  static const std::string q = sql("SELECT ", org_columns, " FROM orgs WHERE id = ?1");
  return q;
}
constexpr const char* touch_api_key_sql = "UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1";

// org_store::generation(): moved before each change is tried, so that a failed or rolled-back
// change costs a cache only a read.
std::atomic<std::uint64_t> org_changes{0};
void org_changing() { org_changes.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

std::uint64_t org_store::generation() { return org_changes.load(std::memory_order_relaxed); }

detail::named_statements detail::org_request_paths() {
  return {
      {"api key by hash", api_key_by_hash_sql()},
      {"organization by id", org_by_id_sql()},
      {"api key use", touch_api_key_sql},
  };
}

// --- organizations ---

result<org> org_store::create_org(const std::string& name, bool superadmin, const std::string& created_at) {
  org_changing();
  org o{new_id("org-"), name, superadmin, created_at, "active", std::nullopt};
  auto r = query(*db_, "INSERT INTO orgs (id, name, superadmin, created_at) VALUES (?1, ?2, ?3, ?4)", o.id, o.name,
                 superadmin, o.created_at)
               .run();
  if (!r) {
    if (r.err().code == errc::conflict) return make_error(errc::conflict, "organization name '" + name + "' is taken");
    return std::move(r).err();
  }
  return o;
}

result<org> org_store::get_org(const std::string& id) {
  return query(*db_, org_by_id_sql(), id).one(read_org, "organization " + id + " not found");
}

result<org> org_store::find_org_by_name(const std::string& name) {
  return query(*db_, sql("SELECT ", org_columns, " FROM orgs WHERE name = ?1"), name)
      .one(read_org, "organization '" + name + "' not found");
}

result<std::vector<org>> org_store::list_orgs() {
  return query(*db_, sql("SELECT ", org_columns, " FROM orgs WHERE state <> 'deleted' ORDER BY name")).rows(read_org);
}

result<void> org_store::set_org_state(const std::string& id, const std::string& state,
                                      const std::vector<std::string>& from, const std::string& at) {
  org_changing();
  auto current = get_org(id);
  if (!current) return std::move(current).err();
  if (std::find(from.begin(), from.end(), current->state) == from.end())
    return make_error(errc::conflict, "organization " + id + " is " + current->state);
  auto changed = query(*db_, "UPDATE orgs SET state = ?2, state_changed_at = ?3 WHERE id = ?1 AND state = ?4", id,
                       state, at, current->state)
                     .changes();
  if (!changed) return std::move(changed).err();
  if (*changed == 0) return make_error(errc::conflict, "organization " + id + " changed meanwhile");
  return {};
}

result<int> org_store::revoke_org_keys(const std::string& org_id, const std::string& revoked_at) {
  org_changing();
  auto changed =
      query(*db_, "UPDATE api_keys SET revoked_at = ?2 WHERE org_id = ?1 AND revoked_at IS NULL", org_id, revoked_at)
          .changes();
  if (!changed) return std::move(changed).err();
  return static_cast<int>(*changed);
}

// --- API keys ---

result<void> org_store::insert_api_key(const api_key& key, const std::string& secret_sha256_hex) {
  org_changing();
  auto r = query(*db_,
                 "INSERT INTO api_keys (id, org_id, name, role, secret_sha256, created_at, expires_at) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                 key.id, key.org_id, key.name, key.role, secret_sha256_hex, key.created_at, key.expires_at)
               .run();
  if (!r) {
    if (r.err().code == errc::conflict) return make_error(errc::conflict, "API key " + key.id + " already exists");
    if (r.err().code == errc::not_found)
      return make_error(errc::not_found, "organization " + key.org_id + " not found");
  }
  return r;
}

result<api_key> org_store::find_api_key_by_hash(const std::string& secret_sha256_hex) {
  return query(*db_, api_key_by_hash_sql(), secret_sha256_hex).one(read_key, "API key not found");
}

result<std::vector<api_key>> org_store::list_api_keys(const std::string& org_id) {
  return query(*db_, sql("SELECT ", key_columns, " FROM api_keys WHERE org_id = ?1 ORDER BY id"), org_id)
      .rows(read_key);
}

result<std::int64_t> org_store::count_working_api_keys(const std::string& org_id, const std::string& now) {
  // Times are fixed-width UTC text (format_time): compared as text they compare as times.
  return query(*db_,
               "SELECT count(*) FROM api_keys WHERE org_id = ?1 AND revoked_at IS NULL AND "
               "(expires_at IS NULL OR expires_at > ?2)",
               org_id, now)
      .count();
}

result<void> org_store::revoke_api_key(const std::string& org_id, const std::string& key_id,
                                       const std::string& revoked_at) {
  org_changing();
  auto changed = query(*db_, "UPDATE api_keys SET revoked_at = ?3 WHERE org_id = ?1 AND id = ?2 AND revoked_at IS NULL",
                       org_id, key_id, revoked_at)
                     .changes();
  if (!changed) return std::move(changed).err();
  if (*changed == 0) return make_error(errc::not_found, "API key " + key_id + " not found");
  return {};
}

result<void> org_store::touch_api_key(const std::string& key_id, const std::string& used_at) {
  return query(*db_, touch_api_key_sql, key_id, used_at).run();
}

}  // namespace sandfort::store
