#pragma once
// How many members a warm pool keeps now (docs/pool.md, "How big it gets"). Pure: the time is
// passed in, so the rule is tested without Docker or a clock (tests/unit/sandbox/pool_sizing_test.cpp);
// the implementation is in warm_pool.cpp beside the pool that follows it.
//
// The rule: a burst is the number of creates that matched the pool within one `window` (served
// from it or not: a pool too small learns from its misses). The target is the largest burst since
// the pool was last idle, kept within [min_size, max_size]. A pool with no matching create for
// `idle_shrink` is idle: its target is min_size again, and the members beyond it are removed.
// Host memory admission bounds what is made beyond that; this class does not know the host.

#include <chrono>
#include <deque>
#include <optional>
#include <string>

namespace sandfort::sandbox {

class pool_sizing {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  struct burst {
    int creates = 0;   // matching creates within one window
    time_point at{};   // when the last of them came
  };

  pool_sizing(int min_size, int max_size, std::chrono::seconds window, std::chrono::seconds idle_shrink);

  // A create matched the pool.
  void matched(time_point now);
  // The number of members to keep.
  int target(time_point now) const;
  // Why target() is what it is, in one sentence for the operator.
  std::string reason(time_point now) const;
  // When the target falls back to min_size if no create matches meanwhile; nullopt: it is there.
  std::optional<time_point> shrinks_at(time_point now) const;
  // The largest burst since the pool was last idle (or, idle, the one before); nullopt: none yet.
  const std::optional<burst>& last_burst() const { return peak_; }
  int min_size() const { return min_; }
  int max_size() const { return max_; }

 private:
  bool idle(time_point now) const { return !last_ || now - *last_ >= idle_; }

  int min_;
  int max_;
  std::chrono::seconds window_;
  std::chrono::seconds idle_;
  std::deque<time_point> recent_;  // the matching creates within the window (the newest, bounded)
  std::optional<time_point> last_;
  std::optional<burst> peak_;
};

}  // namespace sandfort::sandbox
