#pragma once
// Small POSIX helpers shared by the file capability: an owning descriptor, the mapping of
// errno to the API's error classes, and writes that survive short counts and signals.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "sandfort/core/error.hpp"

namespace sandfort::agent::fs {

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

std::string errno_text(int err);

// "<what> <path>: <strerror>" with the class that errno stands for: ENOENT → not_found,
// EEXIST/ENOTEMPTY/EBUSY → conflict, EACCES/EPERM/EROFS → permission_denied,
// ENOSPC/EDQUOT → quota_exceeded (the sandbox's disk is its quota), ENOTDIR/EISDIR/ELOOP/
// ENAMETOOLONG/EINVAL/EXDEV → invalid_argument, anything else → internal.
error errno_error(int err, std::string_view what, std::string_view path);

result<void> write_all(int fd, const char* data, std::size_t size, std::string_view path);

// Reads up to size bytes, retrying on EINTR; 0 at the end of the file.
result<std::size_t> read_some(int fd, char* data, std::size_t size, std::string_view path);

}  // namespace sandfort::agent::fs
