#pragma once
// A clock that stands still until a test moves it (2026-01-01T00:00:00Z unless told otherwise).

#include <chrono>

#include "sandfort/core/clock.hpp"

namespace sandfort::testing {

class manual_clock final : public sandfort::clock {
 public:
  manual_clock() = default;
  explicit manual_clock(time_point start) : t(start) {}

  time_point now() const override { return t; }
  void advance(std::chrono::milliseconds d) { t += d; }
  void set(time_point to) { t = to; }

  time_point t = time_point(std::chrono::seconds(1'767'225'600));
};

}  // namespace sandfort::testing
