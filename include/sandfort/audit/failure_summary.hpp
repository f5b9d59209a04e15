#pragma once
// Authentication failures in the audit chain without one event per failure: a flood of bad
// credentials must not flood the chain (nor the disk). Failures are counted per (source
// address, reason) and written as one `auth.failures` event per pair and interval into the
// operator's chain (the superadmin organization's): a failed credential names no organization
// one could trust.

#include <map>
#include <string>
#include <utility>

#include "sandfort/audit/journal.hpp"
#include "sandfort/store/org_store.hpp"

namespace sandfort::audit {

class failure_summary {
 public:
  failure_summary(store::database& db, journal& j, const clock& clk) : db_(db), orgs_(db), journal_(j), clk_(clk) {}

  // One refused request. Cheap: no database access.
  void note(const std::string& source, const std::string& reason);
  // Writes what was counted since the last flush (one event per source and reason) and starts
  // counting afresh; returns how many events were written. What could not be written is kept.
  result<int> flush();
  std::size_t pending() const { return counts_.size(); }

 private:
  struct tally {
    long long count = 0;
    std::string first, last;
  };
  store::database& db_;  // write admission, transactions
  store::org_store orgs_;
  journal& journal_;
  const clock& clk_;
  // Bounded: beyond this many distinct pairs per interval, further ones are counted together.
  static constexpr std::size_t max_pairs = 10'000;
  std::map<std::pair<std::string, std::string>, tally> counts_;
};

}  // namespace sandfort::audit
