#pragma once
// What the parts that stop sandboxes on the organization's or the host's behalf (admission's kill
// switch and reaper, the disk guard) ask of the lifecycle. The service implements it privately:
// those parts are used by the lifecycle, so depending on the service would be a cycle.

#include <optional>
#include <string>

#include "sandfort/audit/journal.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/guardrail_store.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

class sandbox_stopper {
 public:
  virtual ~sandbox_stopper() = default;
  // Stops a started (or paused) sandbox's container and records it (`message`: why, when not its
  // caller's wish; `deadline`: when a guardrail will delete it; `reason`: a stop_reason).
  virtual task<void> halt(store::sandbox_record& rec, const std::string& message, const audit::actor& who,
                          const std::optional<store::sandbox_deadline>& deadline, const char* reason) = 0;
  virtual task<void> remove(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) = 0;
};

}  // namespace sandfort::sandbox
