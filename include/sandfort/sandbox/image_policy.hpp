#pragma once
// Which registries a sandbox's image may come from. Docker pulls from the host's own network
// position, so an image reference is a URL that dockerd fetches on the caller's behalf: a
// registry host on loopback, a private network or link-local (cloud metadata) would let any
// member make the host call its own services and read parts of the answer in the error.
// Decided on the reference alone, before Docker is asked anything; docs/security.md.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/config.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/docker/image_ref.hpp"

namespace sandfort::sandbox {

class image_policy {
 public:
  // allowed: the entries of images.allowed_registries — "host" or "host:port", matched exactly
  // and case-insensitively, or "*" for any registry whose host is a public name or address.
  // Empty: the registry of default_image, and docker.io.
  image_policy(const std::vector<std::string>& allowed, const std::string& default_image);
  static image_policy from_config(const config& cfg) {
    return image_policy(cfg.images.allowed_registries, cfg.default_image);
  }

  // ok, or invalid_argument that names the registry and the setting: a malformed reference, a
  // registry not on the list, or a local registry host (see local_host_reason) not listed
  // exactly as written.
  result<void> check(std::string_view reference) const;

  const std::vector<std::string>& allowed() const { return allowed_; }

 private:
  std::vector<std::string> allowed_;  // lower case; "index.docker.io" as docker.io
  bool any_public_ = false;           // "*" was listed
};

// Why the reference's registry host is not a public one, or nullopt when it is: an IPv4
// address in any spelling inet_aton takes (what the engine's resolver accepts: "127.1",
// "0x7f.1", "2130706433") or an IPv6 literal whose class is not public (loopback, private,
// link-local, CGNAT, unspecified, reserved, IPv4-mapped forms of those); "localhost" and other
// local-use names (*.localhost, *.local, *.internal, *.home.arpa, *.localdomain); a name of one
// label, which only the host's own files or search domains can resolve.
std::optional<std::string> local_host_reason(const docker::image_reference& ref);

}  // namespace sandfort::sandbox
