#pragma once
// Rate-limit refusals in the audit chain without one event per refusal: a key that loops
// against its limit must not flood its organization's chain. Refusals are counted per
// (organization, principal) and written as one `rate_limit.exceeded` event per pair and
// interval into that organization's chain (the operator's, with the organization in details,
// when it was deleted in the meantime). Like failure_summary and egress_summary, flushed by
// sandfortd every audit.summary_interval_s.

#include <map>
#include <string>
#include <tuple>

#include "sandfort/audit/journal.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/store/org_store.hpp"

namespace sandfort::audit {

struct rate_limit_refusal {
  std::string org_id;
  std::string principal;  // as the chain names actors: "key:key-…", "oidc:sub@issuer"
  std::string source;     // the client's address
  rate_limit limit;       // the bucket that was empty
  bool org_bucket = false;  // that bucket was the organization's, not the principal's own
};

class rate_limit_summary {
 public:
  rate_limit_summary(store::database& db, journal& j, const clock& clk) : db_(db), orgs_(db), journal_(j), clk_(clk) {}

  // One refused request. Cheap: no database access.
  void note(const rate_limit_refusal& r);
  // Writes what was counted since the last flush, all chains in one transaction, and starts
  // counting afresh; returns how many events were written. What could not be written is kept.
  result<int> flush();
  std::size_t pending() const { return tallies_.size(); }

  // Beyond this many distinct pairs per interval, an organization's further principals are
  // counted together as "*".
  static constexpr std::size_t max_pairs = 10'000;

 private:
  struct tally {
    long long count = 0;
    std::string first, last, source;
    rate_limit limit;
  };
  result<std::string> chain_of(const std::string& org_id);

  store::database& db_;  // write admission, transactions
  store::org_store orgs_;
  journal& journal_;
  const clock& clk_;
  // (organization, principal, the organization's bucket)
  std::map<std::tuple<std::string, std::string, bool>, tally> tallies_;
};

}  // namespace sandfort::audit
