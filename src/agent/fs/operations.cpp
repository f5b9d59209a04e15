#include "fs/operations.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "fs/posix.hpp"
#include "sandfort/core/ids.hpp"

namespace sandfort::agent::fs {
namespace {

bool exists_nofollow(const std::string& path, struct stat& st) { return ::lstat(path.c_str(), &st) == 0; }

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return path.substr(0, slash);
}

// Copies a regular file beside `to` under a temporary name and renames it into place, so an
// interrupted copy never leaves a half-written destination.
result<void> copy_file_across(const std::string& from, const std::string& to, const struct stat& st) {
  unique_fd in{::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};
  if (!in) return errno_error(errno, "cannot open", from);
  std::string temp = join_path(parent_of(to), "." + base_name(to) + ".sandfort-" + random_hex(6) + ".tmp");
  unique_fd out{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (!out) return errno_error(errno, "cannot create", temp);
  auto fail = [&](error e) -> result<void> {
    ::unlink(temp.c_str());
    return e;
  };
  std::vector<char> buf(64 * 1024);
  while (true) {
    auto n = read_some(in.get(), buf.data(), buf.size(), from);
    if (!n) return fail(n.err());
    if (*n == 0) break;
    if (auto w = write_all(out.get(), buf.data(), *n, to); !w) return fail(w.err());
  }
  ::fchmod(out.get(), st.st_mode & 07777);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  ::futimens(out.get(), times);
  if (::close(out.release()) != 0) return fail(errno_error(errno, "cannot write", to));
  if (::rename(temp.c_str(), to.c_str()) != 0) return fail(errno_error(errno, "cannot move to", to));
  if (::unlink(from.c_str()) != 0) return errno_error(errno, "copied, but cannot remove", from);
  return {};
}

result<void> move_across(const std::string& from, const std::string& to) {
  struct stat st {};
  if (!exists_nofollow(from, st)) return errno_error(errno, "cannot move", from);
  if (S_ISDIR(st.st_mode))
    return make_error(errc::invalid_argument,
                      "cannot move directory " + from + " to another filesystem (" + to + "); copy it instead");
  if (S_ISREG(st.st_mode)) return copy_file_across(from, to, st);
  if (S_ISLNK(st.st_mode)) {
    std::string target(static_cast<std::size_t>(st.st_size) + 1, '\0');
    ssize_t n = ::readlink(from.c_str(), target.data(), target.size());
    if (n < 0) return errno_error(errno, "cannot read link", from);
    target.resize(static_cast<std::size_t>(n));
    ::unlink(to.c_str());
    if (::symlink(target.c_str(), to.c_str()) != 0) return errno_error(errno, "cannot create link", to);
    if (::unlink(from.c_str()) != 0) return errno_error(errno, "copied, but cannot remove", from);
    return {};
  }
  return make_error(errc::invalid_argument, "cannot move special file " + from + " to another filesystem");
}

// Empties the directory `name` under `parent` and removes it. Descends only into
// directories opened with O_NOFOLLOW, so no symlink is ever followed.
result<void> remove_tree_at(int parent, const std::string& name, const std::string& shown) {
  unique_fd dirfd{::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
  if (!dirfd) {
    int err = errno;
    // Replaced by a non-directory (or a symlink) since we looked: remove just that.
    if ((err == ENOTDIR || err == ELOOP) && ::unlinkat(parent, name.c_str(), 0) == 0) return {};
    if (err == ENOENT) return {};
    return errno_error(err, "cannot open", shown);
  }
  std::vector<std::pair<std::string, bool>> children;  // name, is a directory
  {
    DIR* dir = ::fdopendir(::dup(dirfd.get()));
    if (!dir) return errno_error(errno, "cannot list", shown);
    while (struct dirent* d = ::readdir(dir)) {
      std::string_view child = d->d_name;
      if (child == "." || child == "..") continue;
      bool is_dir = d->d_type == DT_DIR;
      if (d->d_type == DT_UNKNOWN) {
        struct stat st {};
        is_dir = ::fstatat(dirfd.get(), d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      }
      children.emplace_back(std::string(child), is_dir);
    }
    ::closedir(dir);
  }
  for (const auto& [child, is_dir] : children) {
    std::string child_shown = join_path(shown, child);
    if (is_dir) {
      if (auto r = remove_tree_at(dirfd.get(), child, child_shown); !r) return r;
    } else if (::unlinkat(dirfd.get(), child.c_str(), 0) != 0 && errno != ENOENT) {
      if (errno == EISDIR) {  // became a directory meanwhile
        if (auto r = remove_tree_at(dirfd.get(), child, child_shown); !r) return r;
        continue;
      }
      return errno_error(errno, "cannot delete", child_shown);
    }
  }
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    return errno_error(errno, "cannot delete", shown);
  return {};
}

}  // namespace

result<void> make_dirs(const std::string& path, mode_t mode) {
  if (path.empty() || path == "/") return {};
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), mode) != 0) {
      int err = errno;
      struct stat st {};
      if (err != EEXIST) return errno_error(err, "cannot create directory", prefix);
      if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return make_error(errc::invalid_argument, prefix + " exists and is not a directory");
    }
    if (slash == std::string::npos) return {};
  }
}

result<mkdir_outcome> make_dir(const mkdir_request& req) {
  mode_t mode = static_cast<mode_t>(req.mode.value_or(0755));
  struct stat st {};
  if (req.parents) {
    if (exists_nofollow(req.path, st)) {
      // A symlink to a directory counts as the directory, as with mkdir -p.
      if (::stat(req.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        auto existing = stat_entry(req.path);
        if (!existing) return existing.err();
        return mkdir_outcome{std::move(*existing), false};
      }
      return make_error(errc::conflict, req.path + " already exists and is not a directory");
    }
    if (auto made = make_dirs(parent_of(req.path), 0755); !made) return made.err();
  }
  if (::mkdir(req.path.c_str(), mode) != 0) {
    int err = errno;
    if (err == EEXIST) {
      if (req.parents && ::stat(req.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        auto existing = stat_entry(req.path);
        if (!existing) return existing.err();
        return mkdir_outcome{std::move(*existing), false};
      }
      return make_error(errc::conflict, req.path + " already exists");
    }
    if (err == ENOENT)
      return make_error(errc::not_found,
                        "the parent directory of " + req.path + " does not exist (pass \"parents\": true to create it)");
    return errno_error(err, "cannot create directory", req.path);
  }
  // mkdir(2) applies the umask; an explicit mode is what the caller asked for, exactly.
  if (req.mode && ::chmod(req.path.c_str(), mode) != 0) return errno_error(errno, "cannot chmod", req.path);
  auto made = stat_entry(req.path);
  if (!made) return made.err();
  return mkdir_outcome{std::move(*made), true};
}

result<entry> move(const move_request& req) {
  struct stat st {};
  if (!exists_nofollow(req.from, st)) return errno_error(errno, "cannot move", req.from);
  if (!req.overwrite && exists_nofollow(req.to, st))
    return make_error(errc::conflict, req.to + " already exists (pass \"overwrite\": true to replace it)");
  // RENAME_NOREPLACE closes the window between the check above and the rename.
  int rc = req.overwrite ? ::rename(req.from.c_str(), req.to.c_str())
                         : ::renameat2(AT_FDCWD, req.from.c_str(), AT_FDCWD, req.to.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && !req.overwrite && (errno == EINVAL || errno == ENOSYS)) {
    // Filesystems (and seccomp profiles) without renameat2: the check above has to do.
    rc = ::rename(req.from.c_str(), req.to.c_str());
  }
  if (rc != 0) {
    int err = errno;
    if (err == EXDEV) {
      if (auto moved = move_across(req.from, req.to); !moved) return moved.err();
    } else if (err == EEXIST || err == ENOTEMPTY) {
      return make_error(errc::conflict, "cannot move " + req.from + " to " + req.to + ": " + errno_text(err));
    } else if (err == ENOENT) {
      return make_error(errc::not_found, "cannot move " + req.from + " to " + req.to +
                                             ": the destination's directory does not exist");
    } else if (err == EISDIR || err == ENOTDIR) {
      return make_error(errc::conflict, "cannot move " + req.from + " to " + req.to + ": " + errno_text(err));
    } else {
      return errno_error(err, "cannot move " + req.from + " to", req.to);
    }
  }
  return stat_entry(req.to);
}

result<void> remove(const std::string& path, bool recursive) {
  if (path == "/") return make_error(errc::invalid_argument, "refusing to delete /");
  struct stat st {};
  if (!exists_nofollow(path, st)) return errno_error(errno, "cannot delete", path);
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0) return errno_error(errno, "cannot delete", path);
    return {};
  }
  if (::rmdir(path.c_str()) == 0) return {};
  int err = errno;
  if (err != ENOTEMPTY && err != EEXIST) return errno_error(err, "cannot delete", path);
  if (!recursive)
    return make_error(errc::conflict, path + " is a non-empty directory (pass recursive=true to delete it)");
  unique_fd parent{::open(parent_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (!parent) return errno_error(errno, "cannot open", parent_of(path));
  return remove_tree_at(parent.get(), base_name(path), path);
}

}  // namespace sandfort::agent::fs
