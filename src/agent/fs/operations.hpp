#pragma once
// The file operations that answer whole: mkdir, move, delete. Paths are checked by the
// caller (check_path) and resolved by the kernel inside the sandbox.

#include <sys/types.h>

#include <optional>
#include <string>

#include "fs/entry.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent::fs {

// mkdir -p: every missing directory on the way is created with `mode` (less the umask).
// A component that exists and is not a directory → invalid_argument.
result<void> make_dirs(const std::string& path, mode_t mode);

struct mkdir_request {
  std::string path;
  bool parents = false;
  std::optional<unsigned> mode;  // applied exactly (chmod), default 0755 less the umask
};

struct mkdir_outcome {
  entry dir;
  bool created = false;  // false: it already was a directory (parents only)
};

// Exists → conflict, unless `parents` and it is a directory; parent missing without
// `parents` → not_found.
result<mkdir_outcome> make_dir(const mkdir_request& req);

struct move_request {
  std::string from;
  std::string to;
  bool overwrite = false;
};

// rename(2). `from` missing → not_found; `to` exists without overwrite → conflict. Across
// filesystems, files and symlinks are copied then removed; directories → invalid_argument.
// Returns the entry at `to`.
result<entry> move(const move_request& req);

// Missing → not_found; a non-empty directory without `recursive` → conflict. Recursive
// removal never follows symlinks: it walks with openat/unlinkat on directories it opened
// with O_NOFOLLOW, so a link to somewhere else is removed, not what it points at.
result<void> remove(const std::string& path, bool recursive);

}  // namespace sandfort::agent::fs
