// The warm pool's sizing rule (pool_sizing.hpp), with the time passed in: the target grows to the
// largest burst of matching creates within the window, stays within [min_size, max_size], and goes
// back to min_size after the idle period; the reason says which of these it is.

#include <catch2/catch.hpp>

#include "sandfort/sandbox/pool_sizing.hpp"

using namespace sandfort::sandbox;
using namespace std::chrono_literals;

namespace {

const pool_sizing::time_point sizing_t0{std::chrono::hours(1000)};

// `n` matching creates `apart` from each other, from `from`; returns the time of the last.
pool_sizing::time_point sizing_burst(pool_sizing& s, int n, pool_sizing::time_point from,
                                     std::chrono::milliseconds apart = 500ms) {
  auto t = from;
  for (int i = 0; i < n; ++i) {
    t = from + i * apart;
    s.matched(t);
  }
  return t;
}

}  // namespace

TEST_CASE("pool sizing: min_size until a create matches", "[sandbox][pool][sizing]") {
  pool_sizing s(2, 24, 60s, 300s);
  CHECK(s.target(sizing_t0) == 2);
  CHECK_FALSE(s.last_burst());
  CHECK_FALSE(s.shrinks_at(sizing_t0));
  CHECK(s.reason(sizing_t0) == "min_size 2: no matching create yet");
}

TEST_CASE("pool sizing: the target grows to a burst, and holds while creates keep coming", "[sandbox][pool][sizing]") {
  pool_sizing s(2, 24, 60s, 300s);
  auto end = sizing_burst(s, 20, sizing_t0);
  CHECK(s.target(end) == 20);
  REQUIRE(s.last_burst());
  CHECK(s.last_burst()->creates == 20);
  CHECK(s.last_burst()->at == end);
  CHECK(s.reason(end) == "a burst of 20 matching creates within 60 s; back to min_size 2 after 300 s without one");
  // The burst has left the window but the pool is not idle: the target holds.
  CHECK(s.target(end + 120s) == 20);
  // A smaller burst later does not lower it; only idleness does.
  auto later = sizing_burst(s, 3, end + 200s);
  CHECK(s.target(later) == 20);
  REQUIRE(s.shrinks_at(later));
  CHECK(*s.shrinks_at(later) == later + 300s);
}

TEST_CASE("pool sizing: only creates within one window make a burst", "[sandbox][pool][sizing]") {
  pool_sizing s(0, 24, 10s, 300s);
  // One create every 4 s: at most 3 fall within any 10 s.
  auto end = sizing_burst(s, 12, sizing_t0, 4000ms);
  CHECK(s.target(end) == 3);
  CHECK(s.reason(end).starts_with("a burst of 3 matching creates within 10 s"));
}

TEST_CASE("pool sizing: bounded by max_size, and the reason says so", "[sandbox][pool][sizing]") {
  pool_sizing s(1, 8, 60s, 300s);
  auto end = sizing_burst(s, 30, sizing_t0, 100ms);
  CHECK(s.target(end) == 8);
  CHECK(s.last_burst()->creates == 30);
  CHECK(s.reason(end).starts_with("max_size 8: a burst of 30 matching creates within 60 s, capped"));
}

TEST_CASE("pool sizing: idle, it goes back to min_size, and learns afresh", "[sandbox][pool][sizing]") {
  pool_sizing s(2, 24, 60s, 300s);
  auto end = sizing_burst(s, 10, sizing_t0);
  CHECK(s.target(end + 299s) == 10);
  CHECK(s.target(end + 300s) == 2);
  CHECK_FALSE(s.shrinks_at(end + 300s));
  CHECK(s.reason(end + 300s) == "min_size 2: idle, no matching create for 300 s");
  // The last burst is still shown, idle or not.
  CHECK(s.last_burst()->creates == 10);
  // A new spell learns from itself only.
  auto again = sizing_burst(s, 4, end + 400s);
  CHECK(s.target(again) == 4);
  CHECK(s.last_burst()->creates == 4);
}

TEST_CASE("pool sizing: a burst no larger than min_size leaves it there", "[sandbox][pool][sizing]") {
  pool_sizing s(4, 24, 60s, 300s);
  auto end = sizing_burst(s, 3, sizing_t0);
  CHECK(s.target(end) == 4);
  CHECK_FALSE(s.shrinks_at(end));
  CHECK(s.reason(end) == "min_size 4: the largest burst since idle (3 matching creates within 60 s) is not above it");
}

TEST_CASE("pool sizing: a fixed pool (max_size = min_size) never moves", "[sandbox][pool][sizing]") {
  pool_sizing s(2, 2, 60s, 300s);
  auto end = sizing_burst(s, 20, sizing_t0);
  CHECK(s.target(end) == 2);
  CHECK(s.reason(end) == "fixed: min_size = max_size = 2");
  CHECK(s.last_burst()->creates == 20);  // shown all the same
}
