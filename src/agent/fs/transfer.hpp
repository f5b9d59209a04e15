#pragma once
// Whole-file transfer, in pieces: a file written under a temporary name beside its
// destination and renamed into place, and a regular file opened for reading.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fs/posix.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent::fs {

// Readers never see a partial file and a failed or abandoned upload leaves the previous
// content as it was: the bytes go to ".<name>.sandfort-<random>.tmp" in the destination's
// directory, which commit() renames over the destination and the destructor removes
// otherwise. Move-only.
class atomic_file {
 public:
  // Creates the missing parent directories (0755). The destination being a directory →
  // invalid_argument. A symlink to a file is written through (its target is replaced);
  // a dangling one is replaced by the file.
  static result<atomic_file> create(const std::string& path, unsigned mode);

  atomic_file(atomic_file&& other) noexcept;
  atomic_file& operator=(atomic_file&&) = delete;
  atomic_file(const atomic_file&) = delete;
  atomic_file& operator=(const atomic_file&) = delete;
  ~atomic_file();

  result<void> write(const char* data, std::size_t size);
  // Applies the mode (exactly, not through the umask) and renames into place.
  result<void> commit();

  std::uint64_t size() const { return size_; }
  unsigned mode() const { return mode_; }

 private:
  atomic_file(unique_fd fd, std::string temp, std::string dest, std::string shown, unsigned mode);
  unique_fd fd_;
  std::string temp_;
  std::string dest_;   // where rename() puts it
  std::string shown_;  // the path as the caller named it, for messages
  unsigned mode_ = 0644;
  std::uint64_t size_ = 0;
  bool committed_ = false;
};

struct readable_file {
  unique_fd fd;
  std::uint64_t size = 0;
};

// Missing → not_found; a directory or anything but a regular file → invalid_argument (a FIFO
// or a device would block or never end).
result<readable_file> open_for_read(const std::string& path);

}  // namespace sandfort::agent::fs
