#pragma once
// A test whose prerequisite is missing on this machine (a tool, root, a second filesystem, the
// Docker engine): under CI=true that fails the test, since scripts/setup installs everything the
// tests need and CI runs as root; elsewhere it warns and the caller returns.
//
//   if (!have_tool("tar")) return missing_prerequisite("tar is not installed");

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string_view>

namespace sandfort::testing {

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string_view(ci) == "true";
}

inline void missing_prerequisite(std::string_view what) {
  if (in_ci()) FAIL(what << " (CI=true: scripts/setup installs what every test needs, and CI runs as root)");
  WARN(what << ": skipped");
}

}  // namespace sandfort::testing
