#include "watch/watcher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "process/fd.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent::watch {

namespace asio = boost::asio;

namespace {

limits configured;

// What every watched directory reports. Subdirectories are added without following a link
// (IN_DONT_FOLLOW); the watched directory itself may be named through one.
constexpr std::uint32_t watch_mask = IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                     IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;

std::string join_rel(const std::string& dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  std::string out = dir;
  out.push_back('/');
  out.append(name);
  return out;
}

std::string join_abs(const std::string& root, const std::string& rel) {
  if (rel.empty()) return root;
  return root == "/" ? "/" + rel : root + "/" + rel;
}

bool under(const std::string& rel, const std::string& dir) {
  return rel == dir || (rel.size() > dir.size() && rel.compare(0, dir.size(), dir) == 0 && rel[dir.size()] == '/');
}

error add_watch_error(int err, const std::string& path) {
  if (err == ENOSPC)
    return make_error(errc::quota_exceeded, "cannot watch " + path +
                                                ": the kernel's inotify watch limit is reached "
                                                "(fs.inotify.max_user_watches on the host)");
  if (err == ENOENT) return make_error(errc::not_found, "no such directory: " + path);
  if (err == ENOTDIR) return make_error(errc::invalid_argument, path + " is not a directory");
  if (err == EACCES || err == EPERM) return make_error(errc::permission_denied, "cannot watch " + path + ": " + errno_text(err));
  return make_error(errc::internal, "cannot watch " + path + ": " + errno_text(err));
}

// The subdirectories of abs (not following links), by name.
std::vector<std::string> subdirectories(const std::string& abs) {
  std::vector<std::string> out;
  unique_fd fd{::open(abs.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
  if (!fd) return out;
  DIR* dir = ::fdopendir(::dup(fd.get()));
  if (!dir) return out;
  while (struct dirent* d = ::readdir(dir)) {
    std::string_view name = d->d_name;
    if (name == "." || name == "..") continue;
    if (d->d_type == DT_DIR) {
      out.emplace_back(name);
    } else if (d->d_type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(fd.get(), d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) out.emplace_back(name);
    }
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string_view to_string(event_type t) noexcept {
  switch (t) {
    case event_type::create: return "create";
    case event_type::write: return "write";
    case event_type::remove: return "remove";
    case event_type::rename: return "rename";
    case event_type::chmod: return "chmod";
    case event_type::overflow: return "overflow";
    case event_type::limit: return "limit";
    case event_type::end: break;
  }
  return "end";
}

void configure(const limits& l) { configured = l; }
const limits& current_limits() { return configured; }

// ---- one watch ---------------------------------------------------------------------------

watcher::~watcher() {
  if (hub_) hub_->detach(*this);
}

void watcher::push(event e) {
  if (ended_) return;
  if (overflowed_) {
    ++backlog_.back().dropped;
    return;
  }
  // The kernel merges an event identical to the one before it; so do we (a file written in
  // many pieces is one `write` until the reader looks).
  if (!backlog_.empty()) {
    const event& last = backlog_.back();
    if (last.type == e.type && last.name == e.name && e.type != event_type::overflow) return;
  }
  // The last slot is kept for the overflow event that says what was dropped.
  if (backlog_.size() + 1 >= std::max<std::size_t>(configured.backlog, 2)) {
    event over;
    over.type = event_type::overflow;
    over.dropped = 1;
    over.message = "events were dropped: the reader fell behind";
    backlog_.push_back(std::move(over));
    overflowed_ = true;
  } else {
    backlog_.push_back(std::move(e));
  }
  changed_.notify_all();
}

void watcher::end(std::string why) {
  if (ended_) return;
  event e;
  e.type = event_type::end;
  e.message = std::move(why);
  backlog_.push_back(std::move(e));  // beyond the bound: the last word is never dropped
  ended_ = true;
  changed_.notify_all();
}

asio::awaitable<std::vector<event>> watcher::next() {
  while (backlog_.empty() && !ended_) co_await changed_.wait(changed_.version());
  std::vector<event> out(std::make_move_iterator(backlog_.begin()), std::make_move_iterator(backlog_.end()));
  backlog_.clear();
  overflowed_ = false;
  co_return out;
}

// ---- the sandbox's instance --------------------------------------------------------------

hub::hub(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}

hub::~hub() { shutdown(); }

hub& hub::of(const asio::any_io_executor& ex) { return asio::use_service<hub>(asio::query(ex, asio::execution::context)); }

void hub::shutdown() {
  for (watcher* w : watchers_) w->hub_ = nullptr;
  watchers_.clear();
  subscribers_.clear();
  close_instance();
}

std::size_t hub::directories() const {
  std::size_t n = 0;
  for (const watcher* w : watchers_) n += w->dirs_.size();
  return n;
}

result<void> hub::ensure_instance(const asio::any_io_executor& ex) {
  if (fd_) return ok_t{};
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == EMFILE || err == ENFILE)
      return make_error(errc::quota_exceeded,
                        "cannot watch: the kernel's inotify instance limit is reached (fs.inotify.max_user_instances "
                        "on the host) or the agent is out of descriptors");
    return make_error(errc::internal, "inotify_init1: " + errno_text(err));
  }
  fd_ = std::make_shared<asio::posix::stream_descriptor>(ex, fd);
  asio::co_spawn(ex, read_loop(fd_), asio::detached);
  return ok_t{};
}

void hub::close_instance() {
  if (!fd_) return;
  boost::system::error_code ignored;
  fd_->close(ignored);  // the read loop ends with operation_aborted
  fd_.reset();
}

result<std::unique_ptr<watcher>> hub::open(const asio::any_io_executor& ex, const std::string& path, bool recursive) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return make_error(errc::not_found, "no such directory: " + path);
    return add_watch_error(err, path);
  }
  if (!S_ISDIR(st.st_mode)) return make_error(errc::invalid_argument, path + " is not a directory");
  if (watchers_.size() >= configured.max_watches)
    return make_error(errc::quota_exceeded, "this sandbox has " + std::to_string(watchers_.size()) +
                                                " directory watches already, the most it may hold; stop one first");
  if (auto opened = ensure_instance(ex); !opened) return opened.err();
  std::unique_ptr<watcher> w(new watcher(*this, path, recursive));
  watchers_.push_back(w.get());
  if (auto added = add_tree(*w, "", path, true); !added) return added.err();  // w's destructor detaches it
  return w;
}

result<void> hub::add_dir(watcher& w, const std::string& rel, const std::string& abs, bool root) {
  std::uint32_t mask = watch_mask | (root ? 0u : static_cast<std::uint32_t>(IN_DONT_FOLLOW));
  int wd = ::inotify_add_watch(fd_->native_handle(), abs.c_str(), mask);
  if (wd < 0) return add_watch_error(errno, abs);
  auto& subs = subscribers_[wd];
  if (std::find(subs.begin(), subs.end(), &w) == subs.end()) subs.push_back(&w);
  w.dirs_.emplace(wd, rel);  // a directory reached twice (a bind mount) keeps its first name
  return ok_t{};
}

result<void> hub::add_tree(watcher& w, const std::string& rel, const std::string& abs, bool starting) {
  std::vector<std::pair<std::string, std::string>> todo{{rel, abs}};
  for (std::size_t i = 0; i < todo.size(); ++i) {
    if (w.dirs_.size() >= configured.max_directories || directories() >= configured.max_total_directories) {
      std::string why = w.dirs_.size() >= configured.max_directories
                            ? "a watch holds at most " + std::to_string(configured.max_directories) + " directories"
                            : "this sandbox watches at most " + std::to_string(configured.max_total_directories) +
                                  " directories, all watches together";
      if (starting)
        return make_error(errc::quota_exceeded, "cannot watch " + w.root_ + " recursively: " + why +
                                                    "; watch a smaller tree");
      if (!w.limit_told_) {
        w.limit_told_ = true;
        event e;
        e.type = event_type::limit;
        e.name = todo[i].first;
        e.is_dir = true;
        e.message = why + ": this directory and any made later beyond the bound are not watched";
        w.push(std::move(e));
      }
      return ok_t{};
    }
    const auto [r, a] = todo[i];
    auto added = add_dir(w, r, a, starting && i == 0);
    if (!added) {
      if (starting) return added.err();
      // Gone already, or the kernel's limit: the watch goes on without it.
      if (added.err().code == errc::quota_exceeded && !w.limit_told_) {
        w.limit_told_ = true;
        event e;
        e.type = event_type::limit;
        e.name = r;
        e.is_dir = true;
        e.message = added.err().message;
        w.push(std::move(e));
      }
      continue;
    }
    if (!w.recursive_) break;
    for (auto& name : subdirectories(a)) todo.emplace_back(join_rel(r, name), join_abs(w.root_, join_rel(r, name)));
  }
  return ok_t{};
}

void hub::drop_watch(watcher& w, int wd) {
  w.dirs_.erase(wd);
  auto it = subscribers_.find(wd);
  if (it == subscribers_.end()) return;
  auto& subs = it->second;
  subs.erase(std::remove(subs.begin(), subs.end(), &w), subs.end());
  if (subs.empty()) {
    subscribers_.erase(it);
    if (fd_) ::inotify_rm_watch(fd_->native_handle(), wd);
  }
}

void hub::remove_subtree(watcher& w, const std::string& rel) {
  std::vector<int> gone;
  for (const auto& [wd, dir] : w.dirs_)
    if (!dir.empty() && under(dir, rel)) gone.push_back(wd);
  for (int wd : gone) drop_watch(w, wd);
}

void hub::detach(watcher& w) {
  std::vector<int> wds;
  for (const auto& [wd, dir] : w.dirs_) wds.push_back(wd);
  for (int wd : wds) drop_watch(w, wd);
  watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), &w), watchers_.end());
  w.hub_ = nullptr;
  if (watchers_.empty()) close_instance();
}

void hub::dispatch(const inotify_event& ev, std::string_view name) {
  if (ev.mask & IN_Q_OVERFLOW) {
    for (watcher* w : watchers_) {
      event e;
      e.type = event_type::overflow;
      e.message = "events were dropped: the kernel's inotify queue overflowed";
      w->push(std::move(e));
    }
    return;
  }
  auto it = subscribers_.find(ev.wd);
  if (it == subscribers_.end()) return;
  const std::vector<watcher*> subs = it->second;  // adding a subdirectory below may grow the map
  const bool is_dir = (ev.mask & IN_ISDIR) != 0;
  for (watcher* w : subs) {
    auto dir = w->dirs_.find(ev.wd);
    if (dir == w->dirs_.end()) continue;
    const std::string rel_dir = dir->second;
    if (ev.mask & IN_IGNORED) {
      drop_watch(*w, ev.wd);
      if (rel_dir.empty()) w->end("the watched directory is gone");
      continue;
    }
    if (ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
      // A subdirectory's removal or move is told by its parent, under its name there.
      if (rel_dir.empty())
        w->end(ev.mask & IN_DELETE_SELF ? "the watched directory was removed" : "the watched directory was moved");
      continue;
    }
    if (name.empty()) continue;  // the directory's own metadata
    event e;
    e.name = join_rel(rel_dir, name);
    e.is_dir = is_dir;
    if (ev.mask & (IN_CREATE | IN_MOVED_TO)) {
      e.type = event_type::create;
    } else if (ev.mask & IN_MODIFY) {
      e.type = event_type::write;
    } else if (ev.mask & IN_ATTRIB) {
      e.type = event_type::chmod;
    } else if (ev.mask & IN_DELETE) {
      e.type = event_type::remove;
    } else if (ev.mask & IN_MOVED_FROM) {
      e.type = event_type::rename;
    } else {
      continue;
    }
    const std::string rel = e.name;
    const event_type type = e.type;
    w->push(std::move(e));
    if (!w->recursive_ || !is_dir || w->ended_) continue;
    if (type == event_type::create) {
      (void)add_tree(*w, rel, join_abs(w->root_, rel), false);
    } else if (type == event_type::rename) {
      // Its watches would go on under the old name: they are dropped, and added again under
      // the new one if it arrives in the tree.
      remove_subtree(*w, rel);
    }
  }
}

asio::awaitable<void> hub::read_loop(std::shared_ptr<asio::posix::stream_descriptor> fd) {
  // Aligned for inotify_event; room for many events per read.
  alignas(inotify_event) static char buf[64 * 1024];
  for (;;) {
    auto [ec] = co_await fd->async_wait(asio::posix::stream_descriptor::wait_read, use_tuple);
    if (ec || !fd->is_open()) co_return;
    // One read per wake: a flood from inside the sandbox takes turns with every other request.
    ssize_t n = ::read(fd->native_handle(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      co_return;
    }
    if (fd != fd_) co_return;  // closed and replaced meanwhile
    if (!dispatch_all(buf, static_cast<std::size_t>(n))) co_return;
  }
}

bool hub::dispatch_all(const char* buf, std::size_t n) {
  const auto* instance = fd_.get();
  for (std::size_t off = 0; off + sizeof(inotify_event) <= n;) {
    inotify_event ev;
    std::memcpy(&ev, buf + off, sizeof ev);
    const char* name_at = buf + off + sizeof(inotify_event);
    std::string_view name(name_at, ev.len ? ::strnlen(name_at, ev.len) : 0);
    off += sizeof(inotify_event) + ev.len;
    dispatch(ev, name);
    if (fd_.get() != instance) return false;  // the last watch went: the instance is closed
  }
  return true;
}

}  // namespace sandfort::agent::watch
