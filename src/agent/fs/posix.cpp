#include "fs/posix.hpp"

#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace sandfort::agent::fs {

error errno_error(int err, std::string_view what, std::string_view path) {
  errc code = errc::internal;
  switch (err) {
    case ENOENT: code = errc::not_found; break;
    case EEXIST:
    case ENOTEMPTY:
    case EBUSY: code = errc::conflict; break;
    case EACCES:
    case EPERM:
    case EROFS: code = errc::permission_denied; break;
    case ENOSPC:
    case EDQUOT: code = errc::quota_exceeded; break;
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case ENAMETOOLONG:
    case EINVAL:
    case EXDEV: code = errc::invalid_argument; break;
    default: break;
  }
  std::string message(what);
  message += ' ';
  message += path;
  message += ": ";
  message += errno_text(err);
  return make_error(code, std::move(message));
}

result<void> write_all(int fd, const char* data, std::size_t size, std::string_view path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "writing", path);
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return {};
}

result<std::size_t> read_some(int fd, char* data, std::size_t size, std::string_view path) {
  while (true) {
    ssize_t n = ::read(fd, data, size);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) return errno_error(errno, "reading", path);
  }
}

std::optional<std::string> read_link_at(int dirfd, const char* name) {
  std::string buf(256, '\0');
  while (true) {
    ssize_t n = ::readlinkat(dirfd, name, buf.data(), buf.size());
    if (n < 0) return std::nullopt;
    if (static_cast<std::size_t>(n) < buf.size()) {
      buf.resize(static_cast<std::size_t>(n));
      return buf;
    }
    buf.resize(buf.size() * 2);
  }
}

}  // namespace sandfort::agent::fs
