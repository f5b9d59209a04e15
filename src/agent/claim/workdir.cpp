#include "claim/workdir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "process/fd.hpp"

namespace sandfort::agent::claim {
namespace {

result<void> workdir_error(const std::string& what, const std::string& path, int err) {
  return make_error(errc::invalid_argument, what + " " + path + ": " + std::strerror(err));
}

int open_dir_no_follow(int at, const std::string& name) {
  return ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

bool is_symlink(int at, const std::string& name) {
  struct stat st {};
  return ::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

}  // namespace

result<void> enter_workdir(const std::string& path) {
  if (path.empty() || path.front() != '/' || path.find('\0') != std::string::npos)
    return make_error(errc::invalid_argument, "workdir must be an absolute path");
  unique_fd dir(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return workdir_error("cannot open", "/", errno);
  std::string walked;
  for (std::size_t at = 1; at <= path.size();) {
    std::size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    std::string name = path.substr(at, end - at);
    at = end + 1;
    if (name.empty() || name == ".") continue;
    walked += "/" + name;
    int fd = open_dir_no_follow(dir.get(), name);
    if (fd < 0 && errno == ENOENT) {
      if (::mkdirat(dir.get(), name.c_str(), 0755) != 0 && errno != EEXIST)
        return workdir_error("cannot create workdir", walked, errno);
      fd = open_dir_no_follow(dir.get(), name);
    }
    if (fd < 0) {
      int err = errno;
      if ((err == ELOOP || err == ENOTDIR) && is_symlink(dir.get(), name)) {
        // The image's own link: entered as the kernel resolves it, nothing made through it.
        if (::chdir(path.c_str()) != 0) return workdir_error("cannot enter workdir", path, errno);
        return {};
      }
      return workdir_error("cannot enter workdir", walked, err);
    }
    dir.reset(fd);
  }
  if (::fchdir(dir.get()) != 0) return workdir_error("cannot enter workdir", path, errno);
  return {};
}

}  // namespace sandfort::agent::claim
