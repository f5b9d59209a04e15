#pragma once
// Files the agent keeps for itself inside the sandbox (a session's command files, the code
// contexts' kernels): a private directory, files written fresh, and shell quoting for the lines
// that name them.

#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"

namespace sandfort::agent {

// A new private directory (mode 0700) named `<prefix>XXXXXX` under `base`, or, with `base` empty,
// under the first of /dev/shm, /tmp, /run/sandfort that takes one (memory first: writing a
// command is then no disk write).
result<std::string> make_private_dir(const std::string& base, std::string_view prefix);

// Writes a new file (0600) at path, replacing any: a new file each time, since truncating and
// rewriting one makes ext4 (auto_da_alloc) write it back on close, which costs milliseconds.
bool write_new_file(const std::string& path, std::string_view text);

// s in single quotes for a POSIX shell.
std::string shell_quote(const std::string& s);

}  // namespace sandfort::agent
