#pragma once
// The life-cycle event stream (GET /v1/events, docs/events.md) is a view of the audit chain: each
// audit event that records a life-cycle change maps to one event type; every other action (exec,
// files, keys…) is no event. Pure: no database, no I/O.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/audit/records.hpp"

namespace sandfort::audit {

// Every event type, in the order docs/events.md lists them.
const std::vector<std::string>& lifecycle_event_types();
bool is_lifecycle_event_type(std::string_view type);

struct lifecycle_event {
  std::int64_t seq = 0;  // the audit chain's seq: the SSE id, Last-Event-ID's cursor
  std::string type;      // "sandbox.stopped", …
  nlohmann::json body;   // the SSE data: {seq, type, ts, org_id, target, actor, outcome, reason?, details}
};

// The event an audit event is, or nullopt when it is none. `sandbox.stopped` always has a reason
// (details.reason, or for an event written before reasons were recorded, one read from its message).
std::optional<lifecycle_event> lifecycle_event_of(const event_record& e);

}  // namespace sandfort::audit
