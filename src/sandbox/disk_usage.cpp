#include "sandfort/sandbox/disk_usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

namespace sandfort::sandbox {

namespace {

constexpr int open_dir_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

std::uint64_t allocated(const struct stat& st) {
  return st.st_blocks > 0 ? static_cast<std::uint64_t>(st.st_blocks) * 512u : 0u;
}

// An inode with more than one name, counted once over every root of one measurement.
struct linked_inode {
  dev_t dev;
  ino_t ino;
  std::uint64_t bytes;
  std::size_t root;
  bool operator<(const linked_inode& o) const { return std::tie(dev, ino, root) < std::tie(o.dev, o.ino, o.root); }
};

class tree_walk {
 public:
  tree_walk(const walk_limits& limits, tree_usage& out) : limits_(limits), out_(out) {}
  ~tree_walk() { close_all(); }

  // Walks one root; false when the walk must stop (a bound reached, out_.outcome says which).
  bool walk(const std::string& root, std::size_t index) {
    int fd = ::open(root.c_str(), open_dir_flags);
    if (fd < 0) return unreadable(root, errno);
    struct stat st{};
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return unreadable(root, e);
    }
    dev_ = st.st_dev;
    index_ = index;
    add(allocated(st));
    if (!push(fd)) return unreadable(root, errno);
    while (!stack_.empty()) {
      DIR* dir = stack_.back();
      errno = 0;
      const dirent* e = ::readdir(dir);
      if (e == nullptr) {
        if (errno != 0) {  // a read error hides what is below: not a measurement
          int err = errno;
          close_all();
          return unreadable(root, err);
        }
        ::closedir(dir);
        stack_.pop_back();
        continue;
      }
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      if (++out_.entries > limits_.max_entries) return stop(walk_outcome::too_many_entries);
      if (!visit(::dirfd(dir), e->d_name)) return false;
    }
    return true;
  }

  // Hard-linked inodes, once each (the first root that named one counts it).
  void settle_links() {
    std::sort(links_.begin(), links_.end());
    const linked_inode* prev = nullptr;
    for (const auto& l : links_) {
      if (prev && prev->dev == l.dev && prev->ino == l.ino) continue;
      out_.bytes += l.bytes;
      out_.bytes_per_root[l.root] += l.bytes;
      prev = &l;
    }
    links_.clear();
  }

 private:
  bool visit(int parent, const char* name) {
    struct stat st{};
    // Not following: a symlink is an entry of its own size, wherever it points.
    if (::fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return true;  // gone meanwhile
    if (st.st_dev != dev_) return true;  // another filesystem (a mount point): not this tree's
    if (!S_ISDIR(st.st_mode)) {
      if (st.st_nlink > 1) links_.push_back({st.st_dev, st.st_ino, allocated(st), index_});
      else add(allocated(st));
      return true;
    }
    add(allocated(st));
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) return stop(walk_outcome::too_deep);
    int fd = ::openat(parent, name, open_dir_flags);
    if (fd < 0) {
      // Gone, or swapped for a link or a file since fstatat: not entered, counted next time.
      if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) return true;
      return unreadable(name, errno);
    }
    struct stat opened{};
    if (::fstat(fd, &opened) != 0 || opened.st_dev != dev_) {
      ::close(fd);
      return true;
    }
    if (!push(fd)) return unreadable(name, errno);
    return true;
  }

  bool push(int fd) {
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      int e = errno;
      ::close(fd);
      errno = e;
      return false;
    }
    stack_.push_back(d);
    return true;
  }

  void add(std::uint64_t bytes) {
    out_.bytes += bytes;
    out_.bytes_per_root[index_] += bytes;
  }

  bool stop(walk_outcome why) {
    out_.outcome = why;
    close_all();
    return false;
  }

  bool unreadable(const std::string& what, int err) {
    out_.outcome = walk_outcome::unreadable;
    out_.detail = what + ": " + std::strerror(err);
    close_all();
    return false;
  }

  void close_all() {
    for (DIR* d : stack_) ::closedir(d);
    stack_.clear();
  }

  const walk_limits& limits_;
  tree_usage& out_;
  std::vector<DIR*> stack_;  // the open directories from the root down to where the walk is
  std::vector<linked_inode> links_;
  dev_t dev_ = 0;
  std::size_t index_ = 0;
};

}  // namespace

tree_usage measure_trees(const std::vector<std::string>& roots, const walk_limits& limits) {
  tree_usage out;
  out.bytes_per_root.assign(roots.size(), 0);
  tree_walk walk(limits, out);
  for (std::size_t i = 0; i < roots.size(); ++i)
    if (!walk.walk(roots[i], i)) break;
  walk.settle_links();
  return out;
}

}  // namespace sandfort::sandbox
