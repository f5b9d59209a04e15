#include "fs/transfer.hpp"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "fs/entry.hpp"
#include "fs/operations.hpp"
#include "sandfort/core/ids.hpp"

namespace sandfort::agent::fs {
namespace {

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

// Where the bytes of `path` should land: through a symlink to its target, when it has one.
result<std::string> destination_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return path;
  if (S_ISLNK(st.st_mode)) {
    std::unique_ptr<char, decltype(&::free)> resolved{::realpath(path.c_str(), nullptr), &::free};
    if (!resolved) return path;  // dangling: the file replaces the link
    if (::stat(resolved.get(), &st) != 0) return path;
    if (S_ISDIR(st.st_mode)) return make_error(errc::invalid_argument, path + " is a directory");
    return std::string(resolved.get());
  }
  if (S_ISDIR(st.st_mode)) return make_error(errc::invalid_argument, path + " is a directory");
  return path;
}

}  // namespace

result<atomic_file> atomic_file::create(const std::string& path, unsigned mode) {
  if (path == "/") return make_error(errc::invalid_argument, "/ is a directory");
  auto dest = destination_of(path);
  if (!dest) return dest.err();
  std::string dir = dir_of(*dest);
  if (auto made = make_dirs(dir, 0755); !made) return made.err();
  std::string temp = join_path(dir, "." + base_name(*dest) + ".sandfort-" + random_hex(6) + ".tmp");
  if (temp.size() - dir.size() > NAME_MAX) temp = join_path(dir, ".sandfort-" + random_hex(12) + ".tmp");
  unique_fd fd{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (!fd) return errno_error(errno, "cannot create a file in", dir);
  return atomic_file{std::move(fd), std::move(temp), std::move(*dest), path, mode};
}

atomic_file::atomic_file(unique_fd fd, std::string temp, std::string dest, std::string shown, unsigned mode)
    : fd_(std::move(fd)), temp_(std::move(temp)), dest_(std::move(dest)), shown_(std::move(shown)), mode_(mode) {}

atomic_file::atomic_file(atomic_file&& other) noexcept
    : fd_(std::move(other.fd_)),
      temp_(std::move(other.temp_)),
      dest_(std::move(other.dest_)),
      shown_(std::move(other.shown_)),
      mode_(other.mode_),
      size_(other.size_),
      committed_(std::exchange(other.committed_, true)) {}

atomic_file::~atomic_file() {
  if (!committed_) {
    fd_.reset();
    ::unlink(temp_.c_str());
  }
}

result<void> atomic_file::write(const char* data, std::size_t size) {
  if (auto w = write_all(fd_.get(), data, size, shown_); !w) return w;
  size_ += size;
  return {};
}

result<void> atomic_file::commit() {
  if (::fchmod(fd_.get(), static_cast<mode_t>(mode_)) != 0) return errno_error(errno, "cannot chmod", shown_);
  // close() is where some filesystems (NFS, quotas) report a failed write.
  if (::close(fd_.release()) != 0) return errno_error(errno, "cannot write", shown_);
  if (::rename(temp_.c_str(), dest_.c_str()) != 0) {
    int err = errno;
    if (err == EISDIR) return make_error(errc::invalid_argument, shown_ + " is a directory");
    return errno_error(err, "cannot write", shown_);
  }
  committed_ = true;
  return {};
}

result<readable_file> open_for_read(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
  unique_fd fd{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (!fd) {
    int err = errno;
    return errno_error(err, "cannot read", path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "cannot stat", path);
  if (S_ISDIR(st.st_mode))
    return make_error(errc::invalid_argument, path + " is a directory (download it with GET /files/archive)");
  if (!S_ISREG(st.st_mode)) return make_error(errc::invalid_argument, path + " is not a regular file");
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return readable_file{std::move(fd), static_cast<std::uint64_t>(st.st_size)};
}

}  // namespace sandfort::agent::fs
