#pragma once
// Small POSIX helpers shared by the file capability: an owning descriptor, the mapping of
// errno to the API's error classes, and writes that survive short counts and signals.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "process/fd.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent::fs {

using agent::errno_text;
using agent::unique_fd;

// "<what> <path>: <strerror>" with the class that errno stands for: ENOENT → not_found,
// EEXIST/ENOTEMPTY/EBUSY → conflict, EACCES/EPERM/EROFS → permission_denied,
// ENOSPC/EDQUOT → quota_exceeded (the sandbox's disk is its quota), ENOTDIR/EISDIR/ELOOP/
// ENAMETOOLONG/EINVAL/EXDEV → invalid_argument, anything else → internal.
error errno_error(int err, std::string_view what, std::string_view path);

result<void> write_all(int fd, const char* data, std::size_t size, std::string_view path);

// Reads up to size bytes, retrying on EINTR; 0 at the end of the file.
result<std::size_t> read_some(int fd, char* data, std::size_t size, std::string_view path);

// The target of the symlink name (relative to dirfd), whatever its length; nullopt if it is
// not a symlink or cannot be read.
std::optional<std::string> read_link_at(int dirfd, const char* name);

}  // namespace sandfort::agent::fs
