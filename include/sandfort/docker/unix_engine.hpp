#pragma once
// The Docker Engine on its unix socket, for sandfortd's wiring: everything else takes the
// docker::engine it is given.

#include <chrono>
#include <memory>
#include <string>

#include "sandfort/docker/engine.hpp"

namespace sandfort::docker {

struct unix_engine_options {
  std::string socket_path = "/var/run/docker.sock";
  std::chrono::milliseconds timeout{30'000};
  std::chrono::milliseconds pull_timeout{600'000};
};

std::unique_ptr<engine> make_unix_engine(unix_engine_options options);

}  // namespace sandfort::docker
