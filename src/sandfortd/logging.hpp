#pragma once
#include <string>

namespace sandfort::daemon {
// Text for people, JSON (one object per line) for log shippers.
void setup_logging(const std::string& format, const std::string& level);
}  // namespace sandfort::daemon
