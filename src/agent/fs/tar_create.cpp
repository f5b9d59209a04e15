// Streaming creation: a depth-first walk (names sorted, one open directory per level) that
// produces the archive piece by piece as the caller asks for bytes. See tar.hpp.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "fs/entry.hpp"
#include "fs/posix.hpp"
#include "fs/tar.hpp"
#include "fs/tar_format.hpp"

namespace sandfort::agent::fs {
namespace {

constexpr std::string_view pax_header_name = "././@PaxHeader";

struct member {
  std::string name;  // with a trailing '/' for directories
  char type = '0';
  unsigned mode = 0644;
  std::uint64_t uid = 0, gid = 0;
  std::uint64_t size = 0;
  std::int64_t mtime = 0;
  std::string link;
  unsigned devmajor = 0, devminor = 0;
};

// Splits a name over ustar's prefix (155) and name (100) fields at a slash; false if it
// cannot be done.
bool split_ustar_name(std::string_view name, std::string_view& prefix, std::string_view& rest) {
  if (name.size() <= tar::name.width) {
    prefix = {};
    rest = name;
    return true;
  }
  // The last slash that leaves the prefix short enough, with a name that fits after it.
  std::size_t limit = std::min(name.size() - 1, tar::prefix.width);
  for (std::size_t slash = name.rfind('/', limit); slash != std::string_view::npos && slash > 0;
       slash = name.rfind('/', slash - 1)) {
    if (name.size() - slash - 1 > tar::name.width) break;
    if (name.size() - slash - 1 == 0) continue;
    prefix = name.substr(0, slash);
    rest = name.substr(slash + 1);
    return true;
  }
  return false;
}

void append_block(std::string& out, const member& m, std::string_view name, std::string_view prefix) {
  char h[tar::block] = {};
  tar::put_text(h, tar::name, name);
  tar::put_number(h, tar::mode, m.mode);
  tar::put_number(h, tar::uid, m.uid);
  tar::put_number(h, tar::gid, m.gid);
  tar::put_number(h, tar::size_field, m.size);
  tar::put_number(h, tar::mtime, m.mtime < 0 ? 0 : static_cast<std::uint64_t>(m.mtime));
  h[tar::typeflag.offset] = m.type;
  tar::put_text(h, tar::linkname, m.link);
  std::memcpy(h + tar::magic.offset, "ustar", 6);  // with its NUL
  std::memcpy(h + tar::version.offset, "00", 2);
  tar::put_number(h, tar::devmajor, m.devmajor);
  tar::put_number(h, tar::devminor, m.devminor);
  tar::put_text(h, tar::prefix, prefix);
  tar::seal(h);
  out.append(h, tar::block);
}

// The pax header (when ustar cannot hold something) and the ustar header of one member.
void append_headers(std::string& out, const member& m) {
  std::string records;
  std::string_view prefix, name;
  if (!split_ustar_name(m.name, prefix, name)) {
    tar::append_pax_record(records, "path", m.name);
    prefix = {};
    name = std::string_view(m.name).substr(0, tar::name.width);
  }
  if (m.link.size() > tar::linkname.width) tar::append_pax_record(records, "linkpath", m.link);
  if (!tar::fits_octal(tar::size_field, m.size)) tar::append_pax_record(records, "size", std::to_string(m.size));
  if (m.mtime < 0 || !tar::fits_octal(tar::mtime, static_cast<std::uint64_t>(m.mtime)))
    tar::append_pax_record(records, "mtime", std::to_string(m.mtime));
  if (!tar::fits_octal(tar::uid, m.uid)) tar::append_pax_record(records, "uid", std::to_string(m.uid));
  if (!tar::fits_octal(tar::gid, m.gid)) tar::append_pax_record(records, "gid", std::to_string(m.gid));
  if (!records.empty()) {
    member pax;
    pax.type = 'x';
    pax.size = records.size();
    pax.mtime = m.mtime < 0 ? 0 : m.mtime;
    append_block(out, pax, pax_header_name, {});
    out += records;
    out.append(tar::padding_of(records.size()), '\0');
  }
  append_block(out, m, name, prefix);
}

std::vector<std::string> sorted_names(int dirfd) {
  std::vector<std::string> names;
  DIR* dir = ::fdopendir(::dup(dirfd));
  if (!dir) return names;
  while (struct dirent* d = ::readdir(dir)) {
    std::string_view name = d->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

member member_of(std::string name, const struct stat& st) {
  member m;
  m.name = std::move(name);
  m.mode = static_cast<unsigned>(st.st_mode & 07777);
  m.uid = st.st_uid;
  m.gid = st.st_gid;
  m.mtime = static_cast<std::int64_t>(st.st_mtim.tv_sec);
  return m;
}

}  // namespace

struct tar_writer::impl {
  struct level {
    unique_fd fd;
    std::vector<std::string> names;
    std::size_t next = 0;
    std::string prefix;  // archive name of this directory with its '/', "" at the top
  };
  std::vector<level> stack;
  std::string root_path;

  std::string pending;  // headers not yet handed out
  std::size_t pending_pos = 0;
  unique_fd file;
  std::string file_shown;
  std::uint64_t file_left = 0;
  std::uint64_t zeros_left = 0;  // padding, and zeros standing in for a file that shrank

  // A single regular file given as the top-level path.
  std::optional<member> top_file;
  bool trailer_written = false;
  std::map<std::pair<dev_t, ino_t>, std::string> linked;  // files with several links, first name

  // Prepares the next member; false when the walk is over.
  bool next_member() {
    if (top_file) {
      append_headers(pending, *top_file);
      zeros_left = tar::padding_of(top_file->size);
      file_left = top_file->size;
      top_file.reset();
      return true;
    }
    while (!stack.empty()) {
      level& top = stack.back();
      if (top.next == top.names.size()) {
        stack.pop_back();
        continue;
      }
      const std::string& name = top.names[top.next++];
      struct stat st {};
      if (::fstatat(top.fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // vanished
      std::string archive_name = top.prefix + name;
      if (S_ISDIR(st.st_mode)) {
        member m = member_of(archive_name + "/", st);
        m.type = '5';
        append_headers(pending, m);
        unique_fd child{::openat(top.fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
        if (child) {
          auto names = sorted_names(child.get());
          // push_back may move `top`: nothing of it is used after this.
          stack.push_back(level{std::move(child), std::move(names), 0, archive_name + "/"});
        }
        return true;
      }
      if (S_ISREG(st.st_mode)) {
        member m = member_of(archive_name, st);
        if (st.st_nlink > 1) {
          auto [it, first] = linked.try_emplace({st.st_dev, st.st_ino}, archive_name);
          if (!first) {
            m.type = '1';
            m.link = it->second;
            append_headers(pending, m);
            return true;
          }
        }
        unique_fd fd{::openat(top.fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
        if (!fd) continue;  // unreadable: left out
        m.size = static_cast<std::uint64_t>(st.st_size);
        append_headers(pending, m);
        file = std::move(fd);
        file_shown = join_path(root_path, archive_name);
        file_left = m.size;
        zeros_left = tar::padding_of(m.size);
        return true;
      }
      member m = member_of(archive_name, st);
      if (S_ISLNK(st.st_mode)) {
        auto target = read_link_at(top.fd.get(), name.c_str());
        if (!target) continue;
        m.type = '2';
        m.link = std::move(*target);
      } else if (S_ISFIFO(st.st_mode)) {
        m.type = '6';
      } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
        m.type = S_ISCHR(st.st_mode) ? '3' : '4';
        m.devmajor = major(st.st_rdev);
        m.devminor = minor(st.st_rdev);
      } else {
        continue;  // sockets have no place in an archive
      }
      append_headers(pending, m);
      return true;
    }
    return false;
  }

  result<std::size_t> read(char* out, std::size_t capacity) {
    std::size_t produced = 0;
    while (produced < capacity) {
      if (pending_pos < pending.size()) {
        std::size_t n = std::min(capacity - produced, pending.size() - pending_pos);
        std::memcpy(out + produced, pending.data() + pending_pos, n);
        pending_pos += n;
        produced += n;
        if (pending_pos == pending.size()) {
          pending.clear();
          pending_pos = 0;
        }
      } else if (file_left > 0) {
        std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(capacity - produced, file_left));
        auto n = read_some(file.get(), out + produced, want, file_shown);
        if (!n) return n.err();
        if (*n == 0) {  // shrank since its header was written: pad to the announced size
          zeros_left += file_left;
          file_left = 0;
        } else {
          produced += *n;
          file_left -= *n;
        }
        if (file_left == 0) file.reset();
      } else if (zeros_left > 0) {
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(capacity - produced, zeros_left));
        std::memset(out + produced, 0, n);
        produced += n;
        zeros_left -= n;
      } else if (!next_member()) {
        if (trailer_written) break;
        pending.assign(2 * tar::block, '\0');  // the end-of-archive marker
        trailer_written = true;
      }
    }
    return produced;
  }
};

tar_writer::tar_writer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
tar_writer::tar_writer(tar_writer&&) noexcept = default;
tar_writer& tar_writer::operator=(tar_writer&&) noexcept = default;
tar_writer::~tar_writer() = default;

result<tar_writer> tar_writer::open(const std::string& path) {
  unique_fd fd{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (!fd) return errno_error(errno, "cannot read", path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "cannot stat", path);
  auto p = std::make_unique<impl>();
  p->root_path = path;
  if (S_ISDIR(st.st_mode)) {
    auto names = sorted_names(fd.get());
    p->stack.push_back(impl::level{std::move(fd), std::move(names), 0, ""});
  } else if (S_ISREG(st.st_mode)) {
    member m = member_of(base_name(path), st);
    m.size = static_cast<std::uint64_t>(st.st_size);
    p->top_file = std::move(m);
    p->file = std::move(fd);
    p->file_shown = path;
  } else {
    return make_error(errc::invalid_argument, path + " is neither a regular file nor a directory");
  }
  return tar_writer{std::move(p)};
}

result<std::size_t> tar_writer::read(char* out, std::size_t capacity) { return impl_->read(out, capacity); }

}  // namespace sandfort::agent::fs
