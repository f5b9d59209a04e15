// Webhooks and their delivery log: the outbox is the audit chain, a webhook's cursor its place in it.
#include "sandfort/store/webhook_store.hpp"

#include <limits>

#include "statement.hpp"

namespace sandfort::store {

using detail::query;
using detail::statement;

namespace {

constexpr const char* webhook_columns =
    "org_id, id, url, types, description, enabled, sealed_secret, key_id, cursor, created_at, updated_at, "
    "previous_secret, previous_until_ms";

webhook_record read_webhook(const statement& st) {
  return webhook_record{st.column_text(0),          st.column_text(1),       st.column_text(2),
                        st.column_text(3),          st.column_text(4),       st.column_int64(5) != 0,
                        st.column_text(6),          st.column_text(7),       st.column_int64(8),
                        st.column_text(9),          st.column_text(10),      st.column_optional_text(11),
                        st.column_optional_int64(12)};
}

constexpr const char* delivery_columns =
    "org_id, webhook_id, seq, type, state, attempts, last_status, last_error, next_attempt_ms, created_at, "
    "finished_ms, delivered_at";

webhook_delivery read_delivery(const statement& st) {
  return webhook_delivery{st.column_text(0),
                          st.column_text(1),
                          st.column_int64(2),
                          st.column_text(3),
                          st.column_text(4),
                          st.column_int64(5),
                          st.column_optional_int64(6),
                          st.column_text(7),
                          st.column_optional_int64(8),
                          st.column_text(9),
                          st.column_optional_int64(10),
                          st.column_optional_text(11)};
}

error webhook_not_found(const std::string& id) { return make_error(errc::not_found, "webhook " + id + " not found"); }

}  // namespace

result<void> webhook_store::insert(const webhook_record& r) {
  auto done = query(*db_,
                    std::string("INSERT INTO webhooks (") + webhook_columns +
                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    r.org_id, r.id, r.url, r.types_json, r.description, r.enabled, r.sealed_secret, r.key_id, r.cursor,
                    r.created_at, r.updated_at, r.previous_secret, r.previous_until_ms)
                  .run();
  if (!done && done.err().code == errc::not_found) return make_error(errc::not_found, "organization " + r.org_id + " not found");
  return done;
}

result<std::int64_t> webhook_store::count(const std::string& org_id) {
  return query(*db_, "SELECT count(*) FROM webhooks WHERE org_id = ?1", org_id).count();
}

result<std::vector<webhook_record>> webhook_store::list(const std::string& org_id) {
  return query(*db_, std::string("SELECT ") + webhook_columns + " FROM webhooks WHERE org_id = ?1 ORDER BY id", org_id)
      .rows(read_webhook);
}

result<webhook_record> webhook_store::get(const std::string& org_id, const std::string& id) {
  return query(*db_, std::string("SELECT ") + webhook_columns + " FROM webhooks WHERE org_id = ?1 AND id = ?2", org_id,
               id)
      .one(read_webhook, "webhook " + id + " not found");
}

result<void> webhook_store::update(const std::string& org_id, const std::string& id, const webhook_update& u,
                                   const std::string& now) {
  std::optional<std::int64_t> enabled;
  if (u.enabled) enabled = *u.enabled ? 1 : 0;
  auto changed = query(*db_,
                       "UPDATE webhooks SET url = coalesce(?3, url), types = coalesce(?4, types), "
                       "description = coalesce(?5, description), enabled = coalesce(?6, enabled), "
                       "sealed_secret = coalesce(?7, sealed_secret), key_id = coalesce(?8, key_id), updated_at = ?9 "
                       "WHERE org_id = ?1 AND id = ?2",
                       org_id, id, u.url, u.types_json, u.description, enabled, u.sealed_secret, u.key_id, now)
                     .changes();
  if (!changed) return std::move(changed).err();
  if (*changed == 0) return webhook_not_found(id);
  return {};
}

result<void> webhook_store::rotate_secret(const std::string& org_id, const std::string& id,
                                          const std::string& sealed_secret, const std::string& key_id,
                                          std::optional<std::int64_t> keep_until_ms, const std::string& now) {
  auto changed = query(*db_,
                       "UPDATE webhooks SET previous_secret = CASE WHEN ?5 IS NULL THEN NULL ELSE sealed_secret END, "
                       "previous_until_ms = ?5, sealed_secret = ?3, key_id = ?4, updated_at = ?6 "
                       "WHERE org_id = ?1 AND id = ?2",
                       org_id, id, sealed_secret, key_id, keep_until_ms, now)
                     .changes();
  if (!changed) return std::move(changed).err();
  if (*changed == 0) return webhook_not_found(id);
  return {};
}

result<void> webhook_store::remove(const std::string& org_id, const std::string& id) {
  auto changed = query(*db_, "DELETE FROM webhooks WHERE org_id = ?1 AND id = ?2", org_id, id).changes();
  if (!changed) return std::move(changed).err();
  if (*changed == 0) return webhook_not_found(id);
  return query(*db_, "DELETE FROM webhook_deliveries WHERE org_id = ?1 AND webhook_id = ?2", org_id, id).run();
}

result<std::vector<webhook_record>> webhook_store::enabled_webhooks() {
  return query(*db_, std::string("SELECT ") + webhook_columns + " FROM webhooks WHERE enabled = 1 ORDER BY org_id, id")
      .rows(read_webhook);
}

result<std::int64_t> webhook_store::count_sealed_by_other(const std::string& key_id) {
  return query(*db_, "SELECT count(*) FROM webhooks WHERE key_id <> ?1", key_id).count();
}

result<std::optional<webhook_delivery>> webhook_store::pending(const std::string& org_id,
                                                               const std::string& webhook_id) {
  return query(*db_,
               std::string("SELECT ") + delivery_columns +
                   " FROM webhook_deliveries WHERE org_id = ?1 AND webhook_id = ?2 AND state = 'pending' "
                   "ORDER BY seq LIMIT 1",
               org_id, webhook_id)
      .first(read_delivery);
}

result<void> webhook_store::take(const std::string& org_id, const std::string& webhook_id, std::int64_t from,
                                 std::int64_t cursor, const std::optional<webhook_delivery>& taken) {
  auto moved = query(*db_, "UPDATE webhooks SET cursor = ?4 WHERE org_id = ?1 AND id = ?2 AND cursor = ?3", org_id,
                     webhook_id, from, cursor)
                   .changes();
  if (!moved) return std::move(moved).err();
  if (*moved == 0) return make_error(errc::conflict, "webhook " + webhook_id + " moved or went meanwhile");
  if (!taken) return {};
  const auto& d = *taken;
  return query(*db_,
               std::string("INSERT INTO webhook_deliveries (") + delivery_columns +
                   ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
               d.org_id, d.webhook_id, d.seq, d.type, d.state, d.attempts, d.last_status, d.last_error,
               d.next_attempt_ms, d.created_at, d.finished_ms, d.delivered_at)
      .run();
}

result<void> webhook_store::record_attempt(const webhook_delivery& d) {
  // A webhook deleted while its attempt was in flight has no row left: nothing to record.
  return query(*db_,
               "UPDATE webhook_deliveries SET state = ?4, attempts = ?5, last_status = ?6, last_error = ?7, "
               "next_attempt_ms = ?8, finished_ms = ?9, delivered_at = ?10 "
               "WHERE org_id = ?1 AND webhook_id = ?2 AND seq = ?3",
               d.org_id, d.webhook_id, d.seq, d.state, d.attempts, d.last_status, d.last_error, d.next_attempt_ms,
               d.finished_ms, d.delivered_at)
      .run();
}

result<std::vector<webhook_delivery>> webhook_store::deliveries(const std::string& org_id,
                                                                const std::string& webhook_id, std::int64_t before,
                                                                std::size_t limit) {
  // The primary key, backwards from the cursor: a page reads its own rows, whatever the log holds.
  return query(*db_,
               std::string("SELECT ") + delivery_columns +
                   " FROM webhook_deliveries WHERE org_id = ?1 AND webhook_id = ?2 AND seq < ?3 "
                   "ORDER BY seq DESC LIMIT ?4",
               org_id, webhook_id, before > 0 ? before : std::numeric_limits<std::int64_t>::max(), limit)
      .rows(read_delivery);
}

result<std::int64_t> webhook_store::prune_finished(std::int64_t before_ms, std::size_t limit) {
  return query(*db_,
               "DELETE FROM webhook_deliveries WHERE (org_id, webhook_id, seq) IN (SELECT org_id, webhook_id, seq "
               "FROM webhook_deliveries WHERE finished_ms IS NOT NULL AND finished_ms < ?1 LIMIT ?2)",
               before_ms, limit)
      .changes();
}

}  // namespace sandfort::store
