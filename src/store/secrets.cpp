// Organization secrets and interception CAs: sealed values only.
#include "sandfort/store/secret_store.hpp"

#include "statement.hpp"

namespace sandfort::store {

using detail::query;
using detail::statement;

namespace {

constexpr const char* secret_columns =
    "org_id, name, sealed_value, key_id, hosts, placement, version, created_at, updated_at";

secret_record read_secret(const statement& st) {
  return secret_record{st.column_text(0), st.column_text(1), st.column_text(2),  st.column_text(3), st.column_text(4),
                       st.column_text(5), st.column_int64(6), st.column_text(7), st.column_text(8)};
}

}  // namespace

result<void> secret_store::insert(const secret_record& r) {
  auto done = query(*db_,
                    std::string("INSERT INTO secrets (") + secret_columns +
                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    r.org_id, r.name, r.sealed_value, r.key_id, r.hosts_json, r.placement_json, r.version, r.created_at,
                    r.updated_at)
                  .run();
  if (!done && done.err().code == errc::conflict)
    return make_error(errc::conflict, "secret '" + r.name + "' exists; rotate it with PUT /v1/secrets/" + r.name);
  return done;
}

result<std::int64_t> secret_store::count(const std::string& org_id) {
  return query(*db_, "SELECT count(*) FROM secrets WHERE org_id = ?1", org_id).count();
}

result<std::vector<secret_record>> secret_store::list(const std::string& org_id) {
  return query(*db_, std::string("SELECT ") + secret_columns + " FROM secrets WHERE org_id = ?1 ORDER BY name", org_id)
      .rows(read_secret);
}

result<secret_record> secret_store::get(const std::string& org_id, const std::string& name) {
  return query(*db_, std::string("SELECT ") + secret_columns + " FROM secrets WHERE org_id = ?1 AND name = ?2", org_id,
               name)
      .one(read_secret, "secret '" + name + "' not found");
}

result<void> secret_store::update(const std::string& org_id, const std::string& name,
                                  const std::optional<std::string>& sealed_value,
                                  const std::optional<std::string>& key_id,
                                  const std::optional<std::string>& hosts_json, const std::string& now) {
  auto changed = query(*db_,
                       "UPDATE secrets SET sealed_value = coalesce(?3, sealed_value), key_id = coalesce(?4, key_id), "
                       "hosts = coalesce(?5, hosts), version = version + 1, updated_at = ?6 "
                       "WHERE org_id = ?1 AND name = ?2",
                       org_id, name, sealed_value, key_id, hosts_json, now)
                     .changes();
  if (!changed) return std::move(changed).err();
  if (*changed == 0) return make_error(errc::not_found, "secret '" + name + "' not found");
  return {};
}

result<void> secret_store::remove(const std::string& org_id, const std::string& name) {
  auto changed = query(*db_, "DELETE FROM secrets WHERE org_id = ?1 AND name = ?2", org_id, name).changes();
  if (!changed) return std::move(changed).err();
  if (*changed == 0) return make_error(errc::not_found, "secret '" + name + "' not found");
  return {};
}

result<std::int64_t> secret_store::count_sealed_by_other(const std::string& key_id) {
  return query(*db_,
               "SELECT (SELECT count(*) FROM secrets WHERE key_id <> ?1) + "
               "(SELECT count(*) FROM interception_cas WHERE key_id <> ?1)",
               key_id)
      .count();
}

result<std::optional<interception_ca_record>> secret_store::interception_ca(const std::string& org_id) {
  return query(*db_, "SELECT org_id, certificate_pem, sealed_key, key_id, created_at FROM interception_cas "
                     "WHERE org_id = ?1",
               org_id)
      .first([](const statement& st) {
        return interception_ca_record{st.column_text(0), st.column_text(1), st.column_text(2), st.column_text(3),
                                      st.column_text(4)};
      });
}

result<bool> secret_store::insert_interception_ca(const interception_ca_record& r) {
  auto changed = query(*db_,
                       "INSERT OR IGNORE INTO interception_cas (org_id, certificate_pem, sealed_key, key_id, created_at) "
                       "VALUES (?1, ?2, ?3, ?4, ?5)",
                       r.org_id, r.certificate_pem, r.sealed_key, r.key_id, r.created_at)
                     .changes();
  if (!changed) return std::move(changed).err();
  return *changed > 0;
}

result<void> secret_store::remove_interception_ca(const std::string& org_id) {
  return query(*db_, "DELETE FROM interception_cas WHERE org_id = ?1", org_id).run();
}

}  // namespace sandfort::store
