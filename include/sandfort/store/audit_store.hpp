#pragma once
// The audit chain's rows: events and signed checkpoints, stored exactly as given (hashing, signing and
// verifying are the audit module's; src/store/audit.cpp).
// Over the one connection and statement cache of store::database (database.hpp); a thin handle,
// copied freely, that must not outlive its database.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/audit/records.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::store {

// Events come in ascending seq. What a page reads besides the events it returns:
// - without a time bound: nothing when at most one of target, actor, action is set (the primary
//   key or that field's index, sought to the cursor); with several, the events after the cursor
//   that match the first of target, actor, action but not the others;
// - with a time bound: every event of the organization inside the bounds, whatever the cursor
//   (the time index, then a sort by seq). Events outside the bounds are never read, but paging
//   through a wide window reads that window once per page.
// Events of other organizations are never read.
struct audit_filter {
  std::int64_t after_seq = 0;  // cursor: events with seq > after_seq, ascending
  std::string since_ts;        // inclusive bounds on ts when not empty (RFC 3339 strings compare as text)
  std::string until_ts;
  std::string actor;  // exact match when not empty
  std::string action;
  std::string target;
  std::size_t limit = 100;
  // Only the actions life-cycle events are made from (audit::lifecycle_event_of decides which
  // rows among them are events), read through their own index: a gap of exec rows is not read.
  bool lifecycle_only = false;
};

// Whether rows of this action are among those lifecycle_only reads (the index audit_lifecycle's
// WHERE, in C++): what GET /v1/events and webhooks deliver, and so what append observers are told of.
bool is_lifecycle_action(std::string_view action);

class audit_store {
 public:
  // Implicit: a part that needs only this store is handed the database it lives in.
  audit_store(database& db) : db_(&db) {}  // NOLINT

  result<audit::chain_head> audit_head_of(const std::string& org_id);
  // conflict when (org_id, seq) exists: two writers that read the same head cannot both append.
  // invalid_argument when seq < 1.
  result<void> insert_audit_event(const audit::event_record& e);
  result<std::vector<audit::event_record>> list_audit_events(const std::string& org_id, const audit_filter& f);
  // One organization's events in seq order from from_seq (inclusive), one row in memory at a
  // time, from one consistent snapshot; `each` returns false to stop. `each` may read through
  // this database but must not write.
  result<void> scan_audit_events(const std::string& org_id, std::int64_t from_seq,
                                 const std::function<bool(const audit::event_record&)>& each);
  // Every org id that has events or checkpoints, sorted; one index seek per organization.
  result<std::vector<std::string>> audit_org_ids();
  // conflict when that organization already has a checkpoint at that seq.
  result<void> insert_audit_checkpoint(const audit::checkpoint_record& c);
  // The one with the highest seq; nullopt when there is none.
  result<std::optional<audit::checkpoint_record>> latest_audit_checkpoint(const std::string& org_id);
  // Checkpoints with seq > after_seq, ascending.
  result<std::vector<audit::checkpoint_record>> list_audit_checkpoints(const std::string& org_id,
                                                                       std::int64_t after_seq, std::size_t limit);

 private:
  database* db_;
};

}  // namespace sandfort::store
