// Streaming extraction: a small state machine fed with the body's pieces. See tar.hpp for
// what is accepted and why every path is walked with O_NOFOLLOW from the target's descriptor.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "fs/entry.hpp"
#include "fs/operations.hpp"
#include "fs/posix.hpp"
#include "fs/tar.hpp"
#include "fs/tar_format.hpp"

namespace sandfort::agent::fs {

namespace detail {

result<std::vector<std::string>> member_components(std::string_view name) {
  if (name.empty()) return make_error(errc::invalid_argument, "archive entry with an empty name");
  if (name.find('\0') != std::string_view::npos)
    return make_error(errc::invalid_argument, "archive entry name contains a NUL byte");
  if (name.front() == '/')
    return make_error(errc::invalid_argument,
                      "archive entry '" + std::string(name) + "' is an absolute path; refusing the archive");
  std::vector<std::string> out;
  while (!name.empty()) {
    auto slash = name.find('/');
    std::string_view part = name.substr(0, slash);
    if (part == "..")
      return make_error(errc::invalid_argument,
                        "archive entry '" + std::string(name) + "' climbs out with '..'; refusing the archive");
    if (!part.empty() && part != ".") out.emplace_back(part);
    if (slash == std::string_view::npos) break;
    name.remove_prefix(slash + 1);
  }
  return out;
}

}  // namespace detail

namespace {

constexpr std::size_t max_meta_bytes = 1 << 20;  // pax headers and GNU long names
constexpr std::size_t max_skipped_listed = 100;

std::string joined(const std::vector<std::string>& parts, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i) out += '/';
    out += parts[i];
  }
  return out;
}

struct timespec to_timespec(std::int64_t sec, long nsec) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(sec);
  ts.tv_nsec = nsec;
  return ts;
}

// "1700000000" or "1700000000.123456789" (pax mtime).
std::optional<struct timespec> parse_pax_time(std::string_view v) {
  bool negative = !v.empty() && v.front() == '-';
  if (negative) v.remove_prefix(1);
  auto dot = v.find('.');
  std::string_view whole = v.substr(0, dot);
  if (whole.empty() || whole.size() > 18) return std::nullopt;
  std::int64_t sec = 0;
  for (char c : whole) {
    if (c < '0' || c > '9') return std::nullopt;
    sec = sec * 10 + (c - '0');
  }
  long nsec = 0;
  if (dot != std::string_view::npos) {
    std::string_view frac = v.substr(dot + 1);
    long scale = 100'000'000;
    for (char c : frac) {
      if (c < '0' || c > '9') return std::nullopt;
      nsec += (c - '0') * scale;
      scale /= 10;
    }
  }
  if (negative) {
    sec = -sec;
    if (nsec) {
      sec -= 1;
      nsec = 1'000'000'000 - nsec;
    }
  }
  return to_timespec(sec, nsec);
}

std::optional<std::uint64_t> parse_decimal(std::string_view v) {
  if (v.empty() || v.size() > 19) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

struct tar_extractor::impl {
  unique_fd root;
  std::string root_path;
  extract_options options;

  enum class phase { header, data, padding, ended } at = phase::header;
  char header[tar::block];
  std::size_t header_fill = 0;
  std::uint64_t remaining = 0;  // data bytes left in the current entry
  std::uint64_t padding = 0;
  std::uint64_t headers_seen = 0;

  enum class sink { discard, file, meta } to = sink::discard;
  std::string meta;
  char meta_type = 0;

  // Overrides for the next entry, from pax 'x' headers and GNU 'L'/'K' entries.
  std::optional<std::string> next_path, next_link;
  std::optional<std::uint64_t> next_size;
  std::optional<struct timespec> next_mtime;
  bool next_sparse = false;

  // The regular file being written.
  unique_fd file;
  std::string file_name;
  unsigned file_mode = 0644;
  struct timespec file_mtime {};

  // The last parent directory opened, reused by consecutive entries of one directory.
  std::string cached_key;
  unique_fd cached_fd;

  struct dir_meta {
    std::vector<std::string> parts;
    unsigned mode;
    struct timespec mtime;
  };
  std::vector<dir_meta> dirs;
  extract_summary summary;

  error refuse(std::string message) const { return make_error(errc::invalid_argument, std::move(message)); }

  // Opens parts[0..count) below the root, one component at a time with O_NOFOLLOW. With
  // `create`, missing directories are made (0755).
  result<unique_fd> walk(const std::vector<std::string>& parts, std::size_t count, bool create,
                         std::string_view entry_name) {
    unique_fd cur{::dup(root.get())};
    if (!cur) return errno_error(errno, "cannot open", root_path);
    for (std::size_t i = 0; i < count; ++i) {
      const char* name = parts[i].c_str();
      int fd = ::openat(cur.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT && create) {
        if (::mkdirat(cur.get(), name, 0755) != 0 && errno != EEXIST)
          return errno_error(errno, "cannot create directory", join_path(root_path, joined(parts, i + 1)));
        fd = ::openat(cur.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      }
      if (fd < 0) {
        int err = errno;
        std::string where = joined(parts, i + 1);
        if (err == ELOOP || err == ENOTDIR)
          return refuse("archive entry '" + std::string(entry_name) + "': '" + where +
                        "' is a symlink or not a directory; refusing to write through it");
        return errno_error(err, "cannot open", join_path(root_path, where));
      }
      cur.reset(fd);
    }
    return cur;
  }

  // The parent directory of parts.back(), created if missing; borrowed from the cache.
  result<int> parent_of(const std::vector<std::string>& parts, std::string_view entry_name) {
    std::string key = joined(parts, parts.size() - 1);
    if (cached_fd && key == cached_key) return cached_fd.get();
    cached_fd.reset();
    auto opened = walk(parts, parts.size() - 1, true, entry_name);
    if (!opened) return opened.err();
    cached_fd = std::move(*opened);
    cached_key = std::move(key);
    return cached_fd.get();
  }

  // Makes room for a new entry called `name` in `dir`. Directories are kept when keep_dir;
  // otherwise an empty one is removed and a non-empty one is a conflict.
  result<bool> clear(int dir, const std::string& name, bool keep_dir, std::string_view entry_name) {
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return false;
      return errno_error(errno, "cannot stat", join_path(root_path, entry_name));
    }
    if (S_ISDIR(st.st_mode)) {
      if (keep_dir) return true;
      if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0)
        return errno_error(errno, "cannot replace directory", join_path(root_path, entry_name));
      cached_fd.reset();  // it may have been (below) the cached parent
      return false;
    }
    if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT)
      return errno_error(errno, "cannot replace", join_path(root_path, entry_name));
    return false;
  }

  void skip(std::string name) {
    ++summary.skipped_count;
    if (summary.skipped.size() < max_skipped_listed) summary.skipped.push_back(std::move(name));
  }

  result<void> on_header() {
    ++headers_seen;
    if (tar::all_zero(header)) {
      at = phase::ended;  // the end-of-archive marker; whatever follows is ignored
      return {};
    }
    if (!tar::checksum_ok(header)) {
      const auto* b = reinterpret_cast<const unsigned char*>(header);
      if (headers_seen == 1 && ((b[0] == 0x1f && b[1] == 0x8b) || std::memcmp(header, "BZh", 3) == 0 ||
                                std::memcmp(header, "\xfd" "7zXZ", 5) == 0 || std::memcmp(header, "\x28\xb5\x2f\xfd", 4) == 0))
        return refuse("the archive is compressed; send an uncompressed tar");
      return refuse(headers_seen == 1 ? "the body is not a tar archive"
                                      : "corrupt tar header after " + std::to_string(summary.entries) + " entries");
    }
    char type = header[tar::typeflag.offset];
    auto size = tar::number(header, tar::size_field);
    if (!size) return refuse("corrupt size field in a tar header");

    if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
      if (*size > max_meta_bytes) return refuse("tar extended header larger than 1 MiB");
      meta.clear();
      meta_type = type;
      return begin_data(sink::meta, *size);
    }

    std::uint64_t data_size = next_size.value_or(*size);
    std::string name;
    if (next_path) {
      name = *next_path;
    } else {
      name = std::string(tar::text(header, tar::name));
      // The prefix field exists in POSIX ustar only; GNU's "ustar  " header uses it otherwise.
      if (tar::text(header, tar::magic) == "ustar" && header[tar::version.offset] == '0') {
        auto prefix = tar::text(header, tar::prefix);
        if (!prefix.empty()) name = std::string(prefix) + "/" + name;
      }
    }
    std::string link = next_link ? *next_link : std::string(tar::text(header, tar::linkname));
    unsigned mode = static_cast<unsigned>(tar::number(header, tar::mode).value_or(0644) & 07777);
    if (!options.keep_setid) mode &= ~static_cast<unsigned>(S_ISUID | S_ISGID);
    struct timespec mtime = next_mtime.value_or(
        to_timespec(static_cast<std::int64_t>(tar::number(header, tar::mtime).value_or(0)), 0));
    bool sparse = next_sparse;
    next_path.reset();
    next_link.reset();
    next_size.reset();
    next_mtime.reset();
    next_sparse = false;

    if (type == 'S' || sparse) return refuse("archive entry '" + name + "' is a sparse file; not supported");
    if (type == 'M') return refuse("multi-volume archives are not supported");

    auto parts = detail::member_components(name);
    if (!parts) return parts.err();
    bool trailing_slash = !name.empty() && name.back() == '/';

    if (type == '5' || type == 'D' || ((type == '0' || type == '\0' || type == '7') && trailing_slash)) {
      if (auto made = make_directory(*parts, name, mode, mtime); !made) return made;
      return begin_data(sink::discard, data_size);
    }
    if (parts->empty()) return refuse("archive entry '" + name + "' names the target directory as a non-directory");
    switch (type) {
      case '0':
      case '\0':
      case '7':
        if (auto opened = open_file(*parts, name, mode, mtime); !opened) return opened;
        ++summary.entries;
        return begin_data(sink::file, data_size);
      case '2':
        if (auto made = make_symlink(*parts, name, link, mtime); !made) return made;
        ++summary.entries;
        return begin_data(sink::discard, data_size);
      case '1':
        if (auto made = make_hard_link(*parts, name, link); !made) return made;
        ++summary.entries;
        return begin_data(sink::discard, data_size);
      case '6':
        if (auto made = make_fifo(*parts, name, mode); !made) return made;
        ++summary.entries;
        return begin_data(sink::discard, data_size);
      default:  // devices, volume labels, vendor extensions
        skip(name);
        return begin_data(sink::discard, data_size);
    }
  }

  result<void> begin_data(sink where, std::uint64_t size) {
    to = where;
    remaining = size;
    padding = tar::padding_of(size);
    at = phase::data;
    if (size == 0) return end_of_data();
    return {};
  }

  result<void> end_of_data() {
    at = padding ? phase::padding : phase::header;
    if (to == sink::file) {
      std::string shown = join_path(root_path, file_name);
      if (::fchmod(file.get(), static_cast<mode_t>(file_mode)) != 0) return errno_error(errno, "cannot chmod", shown);
      struct timespec times[2] = {to_timespec(0, UTIME_OMIT), file_mtime};
      ::futimens(file.get(), times);
      if (::close(file.release()) != 0) return errno_error(errno, "cannot write", shown);
    } else if (to == sink::meta) {
      return apply_meta();
    }
    return {};
  }

  result<void> apply_meta() {
    if (meta_type == 'L' || meta_type == 'K') {
      std::string value = meta.substr(0, meta.find('\0'));
      (meta_type == 'L' ? next_path : next_link) = std::move(value);
      return {};
    }
    if (meta_type == 'g') return {};  // global defaults: nothing we apply
    bool bad_value = false;
    bool ok = tar::for_each_pax_record(meta, [&](std::string_view key, std::string_view value) {
      if (key == "path") {
        next_path = std::string(value);
      } else if (key == "linkpath") {
        next_link = std::string(value);
      } else if (key == "size") {
        next_size = parse_decimal(value);
        if (!next_size) bad_value = true;
      } else if (key == "mtime") {
        next_mtime = parse_pax_time(value);
      } else if (key.substr(0, 11) == "GNU.sparse.") {
        next_sparse = true;
      }
    });
    if (!ok || bad_value) return refuse("malformed pax extended header");
    return {};
  }

  result<void> make_directory(const std::vector<std::string>& parts, const std::string& name, unsigned mode,
                              struct timespec mtime) {
    if (parts.empty()) return {};  // "./": the target itself keeps its own mode
    auto parent = parent_of(parts, name);
    if (!parent) return parent.err();
    auto exists = clear(*parent, parts.back(), true, name);
    if (!exists) return exists.err();
    if (!*exists && ::mkdirat(*parent, parts.back().c_str(), 0755) != 0 && errno != EEXIST)
      return errno_error(errno, "cannot create directory", join_path(root_path, name));
    dirs.push_back({parts, mode, mtime});
    ++summary.entries;
    return {};
  }

  result<void> open_file(const std::vector<std::string>& parts, const std::string& name, unsigned mode,
                         struct timespec mtime) {
    auto parent = parent_of(parts, name);
    if (!parent) return parent.err();
    auto existed = clear(*parent, parts.back(), false, name);
    if (!existed) return existed.err();
    int fd = ::openat(*parent, parts.back().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return errno_error(errno, "cannot create", join_path(root_path, name));
    file.reset(fd);
    file_name = joined(parts, parts.size());
    file_mode = mode;
    file_mtime = mtime;
    return {};
  }

  result<void> make_symlink(const std::vector<std::string>& parts, const std::string& name, const std::string& target,
                            struct timespec mtime) {
    if (target.empty()) return refuse("archive entry '" + name + "' is a symlink without a target");
    auto parent = parent_of(parts, name);
    if (!parent) return parent.err();
    auto existed = clear(*parent, parts.back(), false, name);
    if (!existed) return existed.err();
    // The link is created as it is: nothing here ever follows it.
    if (::symlinkat(target.c_str(), *parent, parts.back().c_str()) != 0)
      return errno_error(errno, "cannot create symlink", join_path(root_path, name));
    struct timespec times[2] = {to_timespec(0, UTIME_OMIT), mtime};
    ::utimensat(*parent, parts.back().c_str(), times, AT_SYMLINK_NOFOLLOW);
    return {};
  }

  result<void> make_hard_link(const std::vector<std::string>& parts, const std::string& name,
                              const std::string& target) {
    auto target_parts = detail::member_components(target);
    if (!target_parts) return refuse("archive entry '" + name + "' links to '" + target + "' outside the target");
    if (target_parts->empty()) return refuse("archive entry '" + name + "' is a hard link to a directory");
    if (*target_parts == parts) return {};
    auto from_dir = walk(*target_parts, target_parts->size() - 1, false, name);
    if (!from_dir) {
      if (from_dir.err().code == errc::not_found)
        return refuse("archive entry '" + name + "' links to '" + target + "', which is not in the archive");
      return from_dir.err();
    }
    auto parent = parent_of(parts, name);
    if (!parent) return parent.err();
    auto existed = clear(*parent, parts.back(), false, name);
    if (!existed) return existed.err();
    // Flags 0: a symlink as the target is linked itself, never followed.
    if (::linkat(from_dir->get(), target_parts->back().c_str(), *parent, parts.back().c_str(), 0) != 0) {
      int err = errno;
      if (err == ENOENT)
        return refuse("archive entry '" + name + "' links to '" + target + "', which is not in the archive");
      return errno_error(err, "cannot create hard link", join_path(root_path, name));
    }
    return {};
  }

  result<void> make_fifo(const std::vector<std::string>& parts, const std::string& name, unsigned mode) {
    auto parent = parent_of(parts, name);
    if (!parent) return parent.err();
    auto existed = clear(*parent, parts.back(), false, name);
    if (!existed) return existed.err();
    if (::mkfifoat(*parent, parts.back().c_str(), 0600) != 0)
      return errno_error(errno, "cannot create FIFO", join_path(root_path, name));
    ::fchmodat(*parent, parts.back().c_str(), static_cast<mode_t>(mode), 0);
    return {};
  }

  result<void> feed(const char* data, std::size_t size) {
    while (size > 0) {
      switch (at) {
        case phase::ended:
          return {};
        case phase::header: {
          std::size_t n = std::min(size, tar::block - header_fill);
          std::memcpy(header + header_fill, data, n);
          header_fill += n;
          data += n;
          size -= n;
          if (header_fill == tar::block) {
            header_fill = 0;
            if (auto r = on_header(); !r) return r;
          }
          break;
        }
        case phase::data: {
          std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size, remaining));
          if (to == sink::file) {
            if (auto w = write_all(file.get(), data, n, join_path(root_path, file_name)); !w) return w;
          } else if (to == sink::meta) {
            meta.append(data, n);
          }
          data += n;
          size -= n;
          remaining -= n;
          if (remaining == 0)
            if (auto r = end_of_data(); !r) return r;
          break;
        }
        case phase::padding: {
          std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size, padding));
          data += n;
          size -= n;
          padding -= n;
          if (padding == 0) at = phase::header;
          break;
        }
      }
    }
    return {};
  }

  result<extract_summary> finish() {
    if (at == phase::data || at == phase::padding || header_fill != 0)
      return refuse("the archive ends in the middle of an entry (truncated upload?)");
    // Deepest first, so a read-only directory is closed only once everything below is in.
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
      auto dir = walk(it->parts, it->parts.size(), false, joined(it->parts, it->parts.size()));
      if (!dir) continue;  // replaced by a later entry
      ::fchmod(dir->get(), static_cast<mode_t>(it->mode));
      struct timespec times[2] = {to_timespec(0, UTIME_OMIT), it->mtime};
      ::futimens(dir->get(), times);
    }
    dirs.clear();
    return std::move(summary);
  }
};

tar_extractor::tar_extractor(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
tar_extractor::tar_extractor(tar_extractor&&) noexcept = default;
tar_extractor& tar_extractor::operator=(tar_extractor&&) noexcept = default;
tar_extractor::~tar_extractor() = default;

result<tar_extractor> tar_extractor::open(const std::string& dir, extract_options options) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    return make_error(errc::invalid_argument, dir + " exists and is not a directory");
  if (auto made = make_dirs(dir, 0755); !made) return made.err();
  unique_fd fd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (!fd) return errno_error(errno, "cannot open", dir);
  auto p = std::make_unique<impl>();
  p->root = std::move(fd);
  p->root_path = dir;
  p->options = options;
  return tar_extractor{std::move(p)};
}

result<void> tar_extractor::feed(const char* data, std::size_t size) { return impl_->feed(data, size); }

result<extract_summary> tar_extractor::finish() { return impl_->finish(); }

}  // namespace sandfort::agent::fs
