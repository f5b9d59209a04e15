#pragma once
// What the file API says about one path: its type, size, permission bits and modification
// time, as lstat(2) sees it inside the sandbox. Knows nothing of HTTP or JSON.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::agent::fs {

enum class file_type { file, dir, symlink, other };

std::string_view to_string(file_type type) noexcept;
file_type type_of(mode_t st_mode) noexcept;

struct entry {
  std::string name;  // the last component ("/" for the root)
  std::string path;  // as the caller named it (trailing slashes removed)
  file_type type = file_type::other;
  std::uint64_t size = 0;
  unsigned mode = 0;                  // permission bits, 07777
  std::int64_t mtime_ms = 0;          // milliseconds since the epoch
  std::optional<std::string> target;  // symlinks only, and only from stat_entry
};

// Paths come from the caller and are resolved by the kernel: they must be absolute, non-empty
// and free of NUL bytes; `.`/`..` components are fine. Returns the path without trailing
// slashes (except for "/" itself).
result<std::string> check_path(std::string_view path);

// lstat of one path (with the link's target for a symlink). Missing → not_found.
result<entry> stat_entry(const std::string& path);

// The entries of a directory (lstat each, `.`/`..` excluded), sorted by name.
// Missing → not_found; not a directory → invalid_argument.
result<std::vector<entry>> list_dir(const std::string& path);

// "0644": four octal digits.
std::string format_mode(unsigned mode);
// "0644", "644", "4755": an octal mode up to 07777.
result<unsigned> parse_mode(std::string_view octal, std::string_view field);
// RFC 3339 in UTC with milliseconds: "2024-05-01T12:00:00.000Z".
std::string format_time_ms(std::int64_t ms_since_epoch);

// The last component of a checked path ("/" for the root).
std::string base_name(const std::string& path);
// parent + "/" + name without doubling the slash at the root.
std::string join_path(const std::string& parent, std::string_view name);

}  // namespace sandfort::agent::fs
