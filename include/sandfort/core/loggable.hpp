#pragma once
// What a client, a provider or a sandbox sent, made safe for one log line: printable ASCII, the
// rest '?', cut at `max` bytes with an ellipsis.
#include <cstddef>
#include <string>
#include <string_view>

namespace sandfort {

inline std::string loggable(std::string_view s, std::size_t max = 200) {
  std::string out;
  for (char c : s.substr(0, max)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (s.size() > max) out += "…";
  return out;
}

}  // namespace sandfort
