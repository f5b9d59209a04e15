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
// or digest, a name longer than 255 characters. Also refused, though the grammar allows them:
// the spellings the engine would take for an image id or an id prefix when no image has that
// name ("sha256:2" is repository "sha256", tag "2"; "2f3a4b5c6d7e" a repository): one-component
// Docker Hub names "sha256"/"sha384"/"sha512" with a hex tag, and hex-only one-component names.
result<image_reference> parse_image_reference(std::string_view text);

// The name the engine lists the reference under in an image's RepoTags ("python:3.12-slim",
// "ghcr.io/x/y:latest") or, with a digest, RepoDigests ("python@sha256:…"): an image reached
// by the reference as written carries exactly this name.
std::string listed_name(const image_reference& ref);

}  // namespace sandfort::docker
