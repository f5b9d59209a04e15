#pragma once
// Splits an image reference the way the engine's own grammar does: the tag is the part after
// the last ':' that follows the last '/', so a registry port ("localhost:5000/x") is not a tag.

#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/docker/image_ref.hpp"  // the full grammar, for deciding which registry a reference names

namespace sandfort::docker::detail {

struct image_ref {
  std::string repository;  // "localhost:5000/x/y", "debian", "docker.io/library/debian"
  std::string tag;         // "1", "latest"; empty only when a digest is given without a tag
  std::string digest;      // "sha256:...", or empty

  // The form the engine can look up: "repo@digest" when pinned, else "repo:tag".
  std::string lookup_name() const;
  // The tag or digest argument of POST /images/create (a digest wins over a tag).
  const std::string& pull_tag() const { return digest.empty() ? tag : digest; }
};

// "debian" -> {debian, latest}; "localhost:5000/x/y:1" -> {localhost:5000/x/y, 1};
// "x@sha256:ab" -> {x, "", sha256:ab}. Empty or malformed references are invalid_argument.
result<image_ref> split_image_ref(std::string_view ref);

}  // namespace sandfort::docker::detail
