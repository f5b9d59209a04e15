#pragma once
// Image references read the way the Docker engine reads them (distribution/reference: its
// grammar and ParseNormalizedNamed), so that sandfortd decides which registry a reference names
// exactly as the engine will before the engine is asked to pull anything.
//
// The first path component is a registry when it contains '.' or ':', is "localhost", or holds
// an upper-case letter (a repository path never does); otherwise the registry is docker.io.
// "index.docker.io" is docker.io, and a one-component name on docker.io lives under "library/".

#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"

namespace sandfort::docker {

struct image_reference {
  std::string registry;  // "docker.io", "ghcr.io", "localhost:5000", "[::1]:5000", as written
  std::string path;      // "library/python", "x/y": the repository inside the registry
  std::string tag;       // "3.12-slim"; empty when none was written
  std::string digest;    // "sha256:<hex>"; empty when none was written

  // The registry's host without its port; an IPv6 literal without its brackets ("::1").
  std::string host() const;
  // The registry's port, or empty.
  std::string port() const;
  // Whether the host was written as a bracketed IPv6 literal.
  bool ipv6_literal() const { return !registry.empty() && registry.front() == '['; }
};

// Anything the engine would refuse is invalid_argument, with the reason: an empty reference, a
// 64-hex image id, upper case in the repository path, a malformed registry, path component, tag
// or digest, a name longer than 255 characters.
result<image_reference> parse_image_reference(std::string_view text);

}  // namespace sandfort::docker
