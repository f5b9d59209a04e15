#pragma once
// Per-key rate limits: one token bucket per principal (an API key, or an identity provider's
// user), sized by the role it authenticates with (config guardrails.rate_limits). Every
// authenticated request takes one token; a request that finds none is refused with the time
// until one is back. Runs on the I/O thread only (no locking).
//
// Memory is bounded: a bucket that has refilled completely is the same as no bucket, so idle
// ones are dropped as they fill; and there are at most max_entries buckets (beyond that the
// least recently used one goes, which only ever gives that principal a fresh burst).

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
  };

  static constexpr std::size_t default_max_entries = 65'536;

  rate_limiter(const rate_limits_config& limits, const clock& clk, std::size_t max_entries = default_max_entries)
      : limits_(limits), clk_(clk), max_entries_(max_entries) {}

  // The bucket size of p: its role's, or the superadmin's for an admin of the operator's organization.
  const rate_limit& limit_for(const auth::principal& p) const;
  // One request of `who` (the principal's name as the audit chain has it) under `limit`. A
  // refused request takes nothing: retrying as told succeeds.
  decision admit(const std::string& who, const rate_limit& limit);

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

  rate_limits_config limits_;
  const clock& clk_;
  std::size_t max_entries_;
  std::list<bucket> recent_;  // most recently used first
  std::unordered_map<std::string, std::list<bucket>::iterator> index_;
};

}  // namespace sandfort::api
