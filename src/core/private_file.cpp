#include "sandfort/core/private_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "sandfort/core/ids.hpp"

namespace sandfort {

namespace {

// The descriptor closes on every path out.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

error os_error(const std::string& what, const private_file& file, const std::string& path) {
  return make_error(errc::internal, what + " " + file.label + " " + path + ": " + std::strerror(errno));
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

bool nothing_at(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

result<std::string> read_private_file(const private_file& file) {
  const std::string& path = file.path;
  const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | (file.follow_links ? 0 : O_NOFOLLOW);
  fd_guard fd{::open(path.c_str(), flags)};
  if (fd.fd < 0 && errno == ELOOP && !file.follow_links)
    return make_error(errc::invalid_argument, file.label + " " + path + " is a symbolic link");
  if (fd.fd < 0) return os_error("cannot open", file, path);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) return os_error("cannot stat", file, path);
  if (!S_ISREG(st.st_mode)) return make_error(errc::invalid_argument, file.label + " " + path + " is not a regular file");
  if (st.st_uid != ::geteuid())
    return make_error(errc::permission_denied, file.label + " " + path + " is owned by uid " +
                                                   std::to_string(st.st_uid) + ", not by this process's uid " +
                                                   std::to_string(::geteuid()));
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(errc::permission_denied, file.label + " " + path + " is accessible to group or others (mode " +
                                                   mode + "); run: chmod 600 " + path);
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_error("cannot read", file, path);
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > file.max_size) return make_error(errc::invalid_argument, file.label + " " + path + " is too large");
  }
}

result<bool> install_private_file(const private_file& file, std::string_view contents) {
  const std::string temp = file.path + ".tmp-" + random_hex(8);
  fd_guard fd{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
  if (fd.fd < 0) return os_error("cannot create", file, temp);
  // The umask may have taken bits off 0600 (e.g. 0277 leaves the owner unable to read it back).
  if (::fchmod(fd.fd, 0600) != 0 || !write_all(fd.fd, contents) || ::fsync(fd.fd) != 0) {
    auto e = os_error("cannot write", file, temp);
    ::unlink(temp.c_str());
    return e;
  }
  const int linked = ::link(temp.c_str(), file.path.c_str());
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (linked != 0 && link_errno == EEXIST) return false;
  if (linked != 0) {
    errno = link_errno;
    return os_error("cannot create", file, file.path);
  }
  const auto dir = std::filesystem::path(file.path).parent_path();
  fd_guard dir_fd{::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir_fd.fd >= 0) ::fsync(dir_fd.fd);  // best effort: the key is already usable
  return true;
}

}  // namespace sandfort
