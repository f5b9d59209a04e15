#pragma once
// An event's canonical JSON and its details' canonical form from one parse of details: the
// verifier needs both for every event.

#include <cstdint>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/audit/records.hpp"

namespace sandfort::audit::detail {

struct canonical_forms {
  std::string event;
  std::string details;
};

result<canonical_forms> canonical_forms_of(const audit::event_record& e);

// The event's canonical JSON with its details given already in canonical form (what seal()
// made them): no second parse of them.
result<std::string> canonical_event(const audit::event_record& e, std::string_view canonical_details);

// "seq 42", as messages name an event.
inline std::string seq_text(std::int64_t seq) { return "seq " + std::to_string(seq); }

}  // namespace sandfort::audit::detail
