#include "sandfort/core/clock.hpp"

#include <cstdio>
#include <ctime>

namespace sandfort {

std::string format_time(time_point t) {
  using namespace std::chrono;
  auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

bool parse_time(const std::string& s, time_point& out) {
  std::tm tm{};
  int msec = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &msec) != 7)
    return false;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::time_t secs = timegm(&tm);
  out = time_point(std::chrono::seconds(secs)) + std::chrono::milliseconds(msec);
  return true;
}

}  // namespace sandfort
