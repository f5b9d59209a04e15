#pragma once
// Per-key rate limits: one token bucket per principal (an API key, or an identity provider's
// user), sized by the role it authenticates with (config guardrails.rate_limits), and one per
// organization beside it (guardrails.rate_limits.org), so that more keys do not buy more
// requests. Every authenticated request takes one token from each; a request that finds either
// empty is refused with the time until both have one. Runs on the I/O thread only (no locking).
//
// Memory is bounded: a bucket that has refilled completely is the same as no bucket, so idle
// ones are dropped as they fill; and there are at most max_entries buckets (beyond that the
// least recently used one goes, which only ever gives that principal a fresh burst).

#include <algorithm>
#include <cstddef>
#include <list>
#include <string>
#include <unordered_map>

#include "sandfort/auth/principal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"

namespace sandfort::api {

class rate_limiter {
 public:
  struct decision {
    bool allowed = true;
    long long retry_after_s = 0;  // refused: whole seconds until a token is back, at least 1
    bool by_org = false;          // refused: the organization's bucket was the one that decided
  };

  static constexpr std::size_t default_max_entries = 65'536;

  rate_limiter(const rate_limits_config& limits, const clock& clk, std::size_t max_entries = default_max_entries)
      : limits_(limits), clk_(clk), max_entries_(std::max<std::size_t>(max_entries, 2)) {}

  // The bucket size of p: its role's, or the superadmin's for an admin of the operator's organization.
  const rate_limit& limit_for(const auth::principal& p) const;
  // One request of `who` (the principal's name as the audit chain has it) under `limit`. A
  // refused request takes nothing: retrying as told succeeds.
  decision admit(const std::string& who, const rate_limit& limit);
  // The organization's bucket of p: unlimited for the operator (an admin of the superadmin
  // organization), whose keys stop runaway tenants.
  const rate_limit& org_limit_for(const auth::principal& p) const;
  // One request of `who` under `limit` and of its organization (`org`, a name no principal has)
  // under `org_limit`: allowed only when both have a token; a refused one takes from neither.
  decision admit(const std::string& who, const rate_limit& limit, const std::string& org, const rate_limit& org_limit);

  std::size_t size() const { return index_.size(); }

 private:
  struct bucket {
    std::string who;
    double tokens = 0;
    time_point last;     // when tokens was computed
    time_point full_at;  // from then on the bucket is as good as new
  };
  void drop_refilled(time_point now);
  bucket& find_or_add(const std::string& who, const rate_limit& limit, time_point now);
  // find_or_add, then what refilled since it was last seen.
  bucket& refilled(const std::string& who, const rate_limit& limit, time_point now);

  rate_limits_config limits_;
  const clock& clk_;
  std::size_t max_entries_;
  std::list<bucket> recent_;  // most recently used first
  std::unordered_map<std::string, std::list<bucket>::iterator> index_;
};

}  // namespace sandfort::api
