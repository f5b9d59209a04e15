#pragma once
// Files only sandfortd's own user may read: the audit signing key and the secrets key. Both are
// created on first start and refused later when anyone else could read or replace them, so the
// rules live in one place.

#include <cstddef>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"

namespace sandfort {

struct private_file {
  std::string path;
  std::string label;          // "secrets key file": how errors name it
  std::size_t max_size = 0;   // larger contents are refused (it is not what it claims to be)
  bool follow_links = false;  // false: a symbolic link at path is refused
};

// The contents of a regular file owned by this process's effective uid with no group or other
// permission bits ("… is accessible to group or others (mode 0644); run: chmod 600 …").
result<std::string> read_private_file(const private_file& file);

// Creates file.path with `contents`, mode 0600 whatever the umask: written and synced under a
// temporary name, then linked into place, so no reader sees half a key and two starts racing do
// not both win. false: the path appeared meanwhile and was left as it is (read it instead).
result<bool> install_private_file(const private_file& file, std::string_view contents);

// True when nothing (not even a dangling link) is at path.
bool nothing_at(const std::string& path);

}  // namespace sandfort
