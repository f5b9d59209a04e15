#include "fs/entry.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>

#include "fs/posix.hpp"

namespace sandfort::agent::fs {
namespace {

entry from_stat(std::string name, std::string path, const struct stat& st) {
  entry e;
  e.name = std::move(name);
  e.path = std::move(path);
  e.type = type_of(st.st_mode);
  e.size = static_cast<std::uint64_t>(st.st_size);
  e.mode = static_cast<unsigned>(st.st_mode & 07777);
  e.mtime_ms = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
  return e;
}

}  // namespace

std::string_view to_string(file_type type) noexcept {
  switch (type) {
    case file_type::file: return "file";
    case file_type::dir: return "dir";
    case file_type::symlink: return "symlink";
    case file_type::other: break;
  }
  return "other";
}

file_type type_of(mode_t st_mode) noexcept {
  if (S_ISREG(st_mode)) return file_type::file;
  if (S_ISDIR(st_mode)) return file_type::dir;
  if (S_ISLNK(st_mode)) return file_type::symlink;
  return file_type::other;
}

result<std::string> check_path(std::string_view path) {
  if (path.empty()) return make_error(errc::invalid_argument, "path is required");
  if (path.find('\0') != std::string_view::npos) return make_error(errc::invalid_argument, "path contains a NUL byte");
  if (path.front() != '/')
    return make_error(errc::invalid_argument, "path must be absolute, not '" + std::string(path) + "'");
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return std::string(path);
}

std::string base_name(const std::string& path) {
  if (path == "/") return path;
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join_path(const std::string& parent, std::string_view name) {
  std::string out = parent;
  if (out.empty() || out.back() != '/') out.push_back('/');
  out.append(name);
  return out;
}

result<entry> stat_entry(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno_error(errno, "cannot stat", path);
  entry e = from_stat(base_name(path), path, st);
  if (e.type == file_type::symlink) e.target = read_link_at(AT_FDCWD, path.c_str());
  return e;
}

result<std::vector<entry>> list_dir(const std::string& path) {
  unique_fd fd{::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (!fd) {
    int err = errno;
    if (err == ENOTDIR) return make_error(errc::invalid_argument, path + " is not a directory");
    return errno_error(err, "cannot list", path);
  }
  // fdopendir owns the descriptor it is given; ours stays open for fstatat.
  DIR* dir = ::fdopendir(::dup(fd.get()));
  if (!dir) return errno_error(errno, "cannot list", path);
  std::vector<entry> items;
  errno = 0;
  while (struct dirent* d = ::readdir(dir)) {
    std::string_view name = d->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    // An entry removed since readdir saw it is simply not listed.
    if (::fstatat(fd.get(), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    items.push_back(from_stat(std::string(name), join_path(path, name), st));
  }
  ::closedir(dir);
  std::sort(items.begin(), items.end(), [](const entry& a, const entry& b) { return a.name < b.name; });
  return items;
}

std::string format_mode(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

result<unsigned> parse_mode(std::string_view octal, std::string_view field) {
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      std::string(field) + " must be an octal mode like 0644, not '" + std::string(octal) + "'");
  };
  if (octal.empty() || octal.size() > 5) return bad();
  unsigned mode = 0;
  for (char c : octal) {
    if (c < '0' || c > '7') return bad();
    mode = mode * 8 + static_cast<unsigned>(c - '0');
  }
  if (mode > 07777) return bad();
  return mode;
}

std::string format_time_ms(std::int64_t ms_since_epoch) {
  std::int64_t secs = ms_since_epoch / 1000;
  std::int64_t ms = ms_since_epoch % 1000;
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

}  // namespace sandfort::agent::fs
