#pragma once
// How much disk a sandbox holds, measured on the host (docs/limits.md, "Disk"). The trees walked
// (the container's writable layer, its read-write volumes) are written by hostile root: the walk
// never follows a symbolic link, never leaves the filesystem it started on, counts what is
// allocated rather than what sizes claim, and is bounded in entries and depth. A tree beyond the
// bounds cannot be measured, and counts as over any limit.

#include <cstdint>
#include <string>
#include <vector>

namespace sandfort::sandbox {

struct walk_limits {
  std::uint64_t max_entries = 1'000'000;  // files, directories, links… of all roots together
  int max_depth = 256;                     // directories open at once below a root
};

enum class walk_outcome {
  complete,
  too_many_entries,  // stopped at max_entries: bytes is a lower bound
  too_deep,          // a directory deeper than max_depth: bytes is a lower bound
  unreadable,        // a root could not be opened or read (gone, not a directory…): `detail` says
};

struct tree_usage {
  std::uint64_t bytes = 0;                   // allocated (st_blocks × 512), a hard-linked inode once
  std::vector<std::uint64_t> bytes_per_root;  // the same, root by root (a link across roots: its first)
  std::uint64_t entries = 0;
  walk_outcome outcome = walk_outcome::complete;
  std::string detail;
};

// Blocking: run it off the I/O thread. Each root is opened with O_NOFOLLOW and everything below
// it through openat(O_NOFOLLOW) relative to its parent's descriptor: a symbolic link anywhere,
// or a directory swapped for one mid-walk, is counted as the link it is and never entered.
// Sparse files count what they hold; fallocate'd space counts in full.
tree_usage measure_trees(const std::vector<std::string>& roots, const walk_limits& limits);

}  // namespace sandfort::sandbox
