#pragma once
// Webhooks and their delivery log (src/store/webhooks.cpp, docs/events.md "Webhooks"). The outbox
// is the audit chain: a webhook's `cursor` is the last seq it took from its organization's chain,
// and a delivery row is one event taken, pending until delivered or failed. Over the one
// connection of store::database; a thin handle that must not outlive its database.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::store {

struct webhook_record {
  std::string org_id;
  std::string id;  // whk-<16 hex>
  std::string url;
  std::string types_json;  // ["sandbox.stopped", …]; [] means every type
  std::string description;
  bool enabled = true;
  std::string sealed_secret;  // secrets::sealing_key::seal of the signing secret
  std::string key_id;         // which key sealed it
  std::int64_t cursor = 0;    // the last audit seq taken
  std::string created_at;
  std::string updated_at;
  // After a rotation that keeps it: the previous secret, sealed, which also signs until then.
  std::optional<std::string> previous_secret = {};
  std::optional<std::int64_t> previous_until_ms = {};
};

struct webhook_delivery {
  std::string org_id;
  std::string webhook_id;
  std::int64_t seq = 0;  // the audit event's
  std::string type;
  std::string state;  // pending | delivered | failed
  std::int64_t attempts = 0;
  std::optional<std::int64_t> last_status;  // the receiver's HTTP status, when it answered
  std::string last_error;                   // why the last attempt failed; empty when it did not
  std::optional<std::int64_t> next_attempt_ms;  // unix ms; pending only
  std::string created_at;
  std::optional<std::int64_t> finished_ms;  // delivered or failed
  std::optional<std::string> delivered_at;
};

// What changes in a webhook (nullopt: kept).
struct webhook_update {
  std::optional<std::string> url;
  std::optional<std::string> types_json;
  std::optional<std::string> description;
  std::optional<bool> enabled;
  std::optional<std::string> sealed_secret;
  std::optional<std::string> key_id;
};

class webhook_store {
 public:
  webhook_store(database& db) : db_(&db) {}  // NOLINT

  result<void> insert(const webhook_record& r);
  result<std::int64_t> count(const std::string& org_id);
  // By id.
  result<std::vector<webhook_record>> list(const std::string& org_id);
  result<webhook_record> get(const std::string& org_id, const std::string& id);  // not_found
  result<void> update(const std::string& org_id, const std::string& id, const webhook_update& u, const std::string& now);
  // A new sealed secret; the current one kept as the previous until `keep_until_ms` (nullopt: dropped).
  result<void> rotate_secret(const std::string& org_id, const std::string& id, const std::string& sealed_secret,
                             const std::string& key_id, std::optional<std::int64_t> keep_until_ms,
                             const std::string& now);
  // The webhook and its whole delivery log. not_found when absent.
  result<void> remove(const std::string& org_id, const std::string& id);
  // Every enabled webhook of every organization, for the delivery worker (bounded by
  // webhooks.max_per_org per organization).
  result<std::vector<webhook_record>> enabled_webhooks();
  // Rows sealed with another key than key_id (a secrets key file replaced).
  result<std::int64_t> count_sealed_by_other(const std::string& key_id);

  // --- deliveries ---
  // The webhook's pending delivery with the lowest seq (there is at most one), or nullopt.
  result<std::optional<webhook_delivery>> pending(const std::string& org_id, const std::string& webhook_id);
  // Moves the cursor to `cursor` and, when `taken` is given, inserts it (pending); the caller
  // holds the transaction. conflict when the cursor moved since `from` (a concurrent take).
  result<void> take(const std::string& org_id, const std::string& webhook_id, std::int64_t from, std::int64_t cursor,
                    const std::optional<webhook_delivery>& taken);
  // An attempt's outcome written over the row (state, attempts, status, error, times).
  result<void> record_attempt(const webhook_delivery& d);
  // Newest first, seq < before (0: from the newest), at most limit.
  result<std::vector<webhook_delivery>> deliveries(const std::string& org_id, const std::string& webhook_id,
                                                   std::int64_t before, std::size_t limit);
  // Finished rows that finished before `before_ms`, at most `limit` of them; how many went.
  result<std::int64_t> prune_finished(std::int64_t before_ms, std::size_t limit);

 private:
  database* db_;
};

}  // namespace sandfort::store
