#pragma once
// What a query plan line may not say on a request's path: shared by the store's unit tests and
// store_plans (the integration test's view of a daemon's database).

#include <string>

namespace sandfort::testing {

// True when an EXPLAIN QUERY PLAN line reads rows it must not: any scan but one of a live-only
// partial index, a search of sandboxes other than by id or on a live-only index.
inline bool reads_history(const std::string& step) {
  const bool live_index = step.find("USING INDEX sandboxes_live_") != std::string::npos ||
                          step.find("USING INDEX volumes_live_") != std::string::npos ||
                          step.find("USING INDEX snapshots_live_") != std::string::npos;
  if (step.rfind("SCAN ", 0) == 0) return !live_index;
  if (step.rfind("SEARCH sandboxes ", 0) == 0 || step.rfind("SEARCH s ", 0) == 0)
    return !live_index && step.find("(id=?)") == std::string::npos &&
           step.find("(org_id=? AND id=?)") == std::string::npos;
  return false;
}

}  // namespace sandfort::testing
