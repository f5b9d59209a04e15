#pragma once

#include "sandfort/core/error.hpp"
#include "sandfort/docker/engine.hpp"

namespace sandfort::docker::detail {

// Refuses specs the engine would read differently than meant: an empty image, bind paths that
// are relative or contain ':' or ',' (the Binds syntax would split them), names with bad chars.
result<void> validate_spec(const container_spec& spec);

}  // namespace sandfort::docker::detail
