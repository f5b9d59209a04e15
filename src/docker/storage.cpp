// What the engine's storage can enforce: Docker's StorageOpt size works only for overlay2 on
// XFS with project quotas, and Docker says so only by refusing a create.
#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"

#include <sstream>

#include "json_access.hpp"

namespace sandfort::docker {

namespace {

using detail::member;
using detail::string_of;

// /proc/self/mounts writes a space in a path as \040 (and tab, newline, backslash likewise).
std::string unescape_mount_field(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto octal = [&](std::size_t k, char max) { return s[k] >= '0' && s[k] <= max; };
    if (s[i] == '\\' && s.size() - i >= 4 && octal(i + 1, '3') && octal(i + 2, '7') && octal(i + 3, '7')) {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool is_at_or_under(const std::string& path, const std::string& dir) {
  if (dir == "/") return !path.empty() && path.front() == '/';
  return path == dir || (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

bool has_option(const std::string& options, std::string_view wanted) {
  std::size_t start = 0;
  while (start <= options.size()) {
    auto comma = options.find(',', start);
    if (comma == std::string::npos) comma = options.size();
    if (std::string_view(options).substr(start, comma - start) == wanted) return true;
    start = comma + 1;
  }
  return false;
}

}  // namespace

storage_info parse_storage_info(const nlohmann::json& body) {
  storage_info out;
  out.driver = string_of(member(body, "Driver"));
  out.root_dir = string_of(member(body, "DockerRootDir"));
  const auto& status = member(body, "DriverStatus");
  if (status.is_array())
    for (const auto& pair : status)
      if (pair.is_array() && pair.size() == 2 && string_of(pair[0]) == "Backing Filesystem")
        out.backing_filesystem = string_of(pair[1]);
  return out;
}

bool supports_storage_quota(const storage_info& info, std::string_view mounts) {
  if (info.driver != "overlay2" || info.backing_filesystem != "xfs" || info.root_dir.empty()) return false;
  // The mount holding the root directory: the last of the longest matching mount points wins,
  // as the kernel stacks later mounts over earlier ones.
  std::string best_point, best_type, best_options;
  std::istringstream lines{std::string(mounts)};
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string device, point, type, options;
    if (!(fields >> device >> point >> type >> options)) continue;
    point = unescape_mount_field(point);
    if (!is_at_or_under(info.root_dir, point) || point.size() < best_point.size()) continue;
    best_point = point;
    best_type = type;
    best_options = options;
  }
  return best_type == "xfs" && (has_option(best_options, "prjquota") || has_option(best_options, "pquota"));
}

}  // namespace sandfort::docker
