#pragma once
// The sandbox's working directory (docs/images.md): the agent enters it at start (--workdir)
// and at a claim, and every process it starts inherits it — exec, sessions, background
// commands and the PTY.

#include <string>

#include "sandfort/core/error.hpp"

namespace sandfort::agent::claim {

// Enters `path` (absolute), making the directories missing on the way as the agent's own user —
// the sandbox's, so what it makes is that user's. It walks the path one directory at a time
// without following a symbolic link: a link the image put on the way is never made into or
// through. Such a path is entered as the kernel resolves it (as Docker enters a WorkingDir),
// with nothing made.
result<void> enter_workdir(const std::string& path);

}  // namespace sandfort::agent::claim
