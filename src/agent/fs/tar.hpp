#pragma once
// Tar archives, streamed both ways, so the agent needs no `tar` in the image and never holds
// an archive in memory.
//
// Reading understands what GNU tar and Python's tarfile write: ustar (with its prefix field),
// pax extended headers (path, linkpath, size, mtime), GNU long names/links ('L'/'K') and
// base-256 numbers. It creates files, directories, symlinks, hard links and FIFOs with their
// modes and modification times; ownership is never applied (like tar --no-same-owner), and
// set-uid/set-gid bits only when asked (extract_options).
// Character and block devices are skipped (listed in the summary); sparse and multi-volume
// entries are refused.
//
// Safety: an entry whose path is absolute or has a `..` component is refused, and so is one
// whose parent path inside the target passes through a symlink or a non-directory: every
// component is opened with O_NOFOLLOW, relative to the target's descriptor, so a symlink that
// the archive itself planted cannot redirect a later entry outside the target. Hard links may
// only point at paths inside the target, resolved the same way. A refusal stops extraction
// there; what was extracted before stays.
//
// Writing produces POSIX ustar with pax headers where ustar cannot hold a value (long names
// and link targets, sizes ≥ 8 GiB, times before 1970 or after 2242), which GNU tar, bsdtar and
// Python read. Files with several links inside the archive become hard-link entries.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::agent::fs {

struct extract_options {
  // Set-uid and set-gid bits are dropped from every entry unless this is set: an archive from
  // outside must not plant a privileged executable (GNU tar run as non-root does the same).
  bool keep_setid = false;
};

struct extract_summary {
  std::uint64_t entries = 0;          // extracted
  std::vector<std::string> skipped;   // entry names that were not extracted (first 100)
  std::uint64_t skipped_count = 0;
};

class tar_extractor {
 public:
  // Creates `dir` (and its parents, 0755) if missing; it existing as a non-directory →
  // invalid_argument. `dir` itself is resolved normally (a symlink to a directory is fine).
  static result<tar_extractor> open(const std::string& dir, extract_options options = {});

  tar_extractor(tar_extractor&&) noexcept;
  tar_extractor& operator=(tar_extractor&&) noexcept;
  ~tar_extractor();

  // The next bytes of the archive, in pieces of any size. Errors: invalid_argument for a
  // malformed or refused archive, other classes for filesystem failures.
  result<void> feed(const char* data, std::size_t size);
  // The body ended: an archive cut off in the middle of an entry → invalid_argument.
  // Applies the directories' modes and times (last, so read-only ones can be filled).
  result<extract_summary> finish();

  struct impl;

 private:
  explicit tar_extractor(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

class tar_writer {
 public:
  // A directory → an archive of its contents (names relative to it); a regular file → an
  // archive of that one file under its base name. `path` is resolved normally; inside a
  // directory symlinks are archived as symlinks. Missing → not_found.
  static result<tar_writer> open(const std::string& path);

  tar_writer(tar_writer&&) noexcept;
  tar_writer& operator=(tar_writer&&) noexcept;
  ~tar_writer();

  // Fills up to `capacity` bytes with the next part of the archive; 0 once it is complete.
  // Entries that vanish or cannot be opened while walking are left out; a file that shrinks
  // while being read is padded with zeros to the size its header announced.
  result<std::size_t> read(char* out, std::size_t capacity);

  struct impl;

 private:
  explicit tar_writer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

namespace detail {
// The components of an archive member's name inside the target ("./a//b/" → {"a","b"});
// absolute names and `..` components are refused. An empty result is the target itself.
result<std::vector<std::string>> member_components(std::string_view name);
}  // namespace detail

}  // namespace sandfort::agent::fs
