#include "sandfort/audit/journal.hpp"

#include "sandfort/audit/chain.hpp"

namespace sandfort::audit {

const actor& system_actor() {
  static const actor system{};
  return system;
}

nlohmann::json floats_as_text(nlohmann::json j) {
  if (j.is_number_float()) return j.dump();
  if (j.is_structured())
    for (auto& v : j) v = floats_as_text(std::move(v));
  return j;
}

result<audit::event_record> journal::append(const std::string& org_id, const actor& who, const record& r) {
  auto head = events_.audit_head_of(org_id);
  if (!head) return std::move(head).err();
  audit::event_record e;
  e.org_id = org_id;
  e.ts = format_time(clk_.now());
  e.actor = who.name;
  e.action = r.action;
  e.target = r.target;
  e.outcome = r.outcome;
  e.request_id = who.request_id;
  e.source = who.source;
  // Invalid UTF-8 (a request path's raw bytes) is replaced, not thrown on: an action is recorded
  // whatever bytes its caller sent. seal() does the same for the other fields.
  e.details = r.details.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (auto sealed = seal(e, *head); !sealed) return std::move(sealed).err();
  if (auto inserted = events_.insert_audit_event(e); !inserted) return std::move(inserted).err();
  return e;
}

result<audit::event_record> journal::record_event(const std::string& org_id, const actor& who, const record& r) {
  auto tx = db_.begin();
  if (!tx) return std::move(tx).err();
  auto e = append(org_id, who, r);
  if (!e) return e;
  if (auto committed = tx->commit(); !committed) return std::move(committed).err();
  return e;
}

}  // namespace sandfort::audit
