#pragma once
// Shared by the fuzz targets: a check that aborts (so libFuzzer records the input) and small
// helpers. Header-only: each target is one translation unit.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

// Unlike assert(), active in every build type.
#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

namespace sandfort::fuzz {

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Splits the input at the first occurrence of sep: {before, after}; after is empty without it.
inline std::pair<std::string_view, std::string_view> split(std::string_view s, std::string_view sep) {
  auto at = s.find(sep);
  if (at == std::string_view::npos) return {s, {}};
  return {s.substr(0, at), s.substr(at + sep.size())};
}

}  // namespace sandfort::fuzz
