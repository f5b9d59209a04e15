#pragma once
// Time as a seam: services take a clock so tests never depend on the wall clock.

#include <chrono>
#include <string>

namespace sandfort {

using time_point = std::chrono::system_clock::time_point;

class clock {
 public:
  virtual ~clock() = default;
  virtual time_point now() const = 0;
};

class system_clock final : public clock {
 public:
  time_point now() const override { return std::chrono::system_clock::now(); }
};

// RFC 3339 in UTC with millisecond precision: 2026-11-29T08:42:55.123Z
std::string format_time(time_point t);
// Parses what format_time writes; returns false on anything else.
bool parse_time(const std::string& s, time_point& out);

}  // namespace sandfort
