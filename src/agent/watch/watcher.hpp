#pragma once
// Directory watching with inotify: what changes under a directory (optionally its whole tree,
// new subdirectories included as they appear), as events named relative to it.
//
// One inotify instance serves every watch of the sandbox (the `hub`): inotify's instances and
// watches are counted per user by the kernel, and root in every container is the host's root,
// so each sandbox holds one instance, opened while it has a watch, and a bounded number of
// watched directories. Each watch queues at most `limits::backlog` events for its reader; a
// reader that falls behind gets one `overflow` event in place of what was dropped, never a
// growing queue.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "process/async.hpp"
#include "sandfort/core/error.hpp"

struct inotify_event;

namespace sandfort::agent::watch {

enum class event_type {
  create,    // created, or moved in (a rename's new name)
  write,     // its content changed
  remove,    // deleted
  rename,    // moved away (a rename's old name)
  chmod,     // its metadata changed (mode, owner, times)
  overflow,  // events were dropped: the reader fell behind, or the kernel's queue overflowed
  limit,     // a new subdirectory is not watched: the watch's or the sandbox's bound is reached
  end,       // the watched directory itself was removed or moved: nothing more will come
};
std::string_view to_string(event_type t) noexcept;

struct event {
  event_type type = event_type::create;
  std::string name;           // relative to the watched directory ("a/b.txt"); empty for overflow and end
  bool is_dir = false;
  std::uint64_t dropped = 0;  // overflow: events dropped here (0: the kernel's, uncounted)
  std::string message;        // overflow, limit, end: what happened
};

struct limits {
  std::size_t max_watches = 32;            // watches at once in this sandbox
  std::size_t max_directories = 4096;      // directories under one recursive watch
  std::size_t max_total_directories = 8192;  // directories watched in this sandbox, all watches together
  std::size_t backlog = 1024;              // events queued for one watch's reader
};
void configure(const limits& l);
const limits& current_limits();

class hub;

class watcher {
 public:
  watcher(const watcher&) = delete;
  watcher& operator=(const watcher&) = delete;
  ~watcher();

  // Waits until an event is queued, then hands over every queued one, in order. Empty once the
  // watch has ended and its last event was handed over.
  boost::asio::awaitable<std::vector<event>> next();

  const std::string& path() const { return root_; }
  bool recursive() const { return recursive_; }
  std::size_t directories() const { return dirs_.size(); }
  std::size_t queued() const { return backlog_.size(); }

 private:
  friend class hub;
  watcher(hub& h, std::string root, bool recursive) : hub_(&h), root_(std::move(root)), recursive_(recursive) {}
  void push(event e);
  void end(std::string why);

  hub* hub_;
  std::string root_;
  bool recursive_;
  std::map<int, std::string> dirs_;  // inotify watch descriptor → directory relative to root_ ("" for root_)
  std::deque<event> backlog_;
  bool overflowed_ = false;  // the queue's last event is an overflow that later drops add to
  bool ended_ = false;
  bool limit_told_ = false;
  notifier changed_;
};

// The sandbox's one inotify instance and every watch on it (one per io_context).
class hub : public boost::asio::execution_context::service {
 public:
  using key_type = hub;
  static inline boost::asio::execution_context::id id;

  explicit hub(boost::asio::execution_context& ctx);
  ~hub() override;
  static hub& of(const boost::asio::any_io_executor& ex);

  // Watches `path` (absolute, checked): not_found when it does not exist, invalid_argument when
  // it is not a directory, quota_exceeded when this sandbox has max_watches already, the tree
  // has more directories than a watch may hold, or the kernel's inotify limits are reached.
  result<std::unique_ptr<watcher>> open(const boost::asio::any_io_executor& ex, const std::string& path,
                                        bool recursive);

  std::size_t watches() const { return watchers_.size(); }
  std::size_t directories() const;  // held by all watches together
  bool instance_open() const { return fd_ != nullptr; }

 private:
  friend class watcher;
  void shutdown() override;
  result<void> ensure_instance(const boost::asio::any_io_executor& ex);
  void close_instance();
  // Adds `abs` (relative name `rel`) and, for a recursive watch, every directory below it.
  // At the start a bound reached is an error; later it is a `limit` event and the rest unwatched.
  result<void> add_tree(watcher& w, const std::string& rel, const std::string& abs, bool starting);
  result<void> add_dir(watcher& w, const std::string& rel, const std::string& abs, bool root);
  void remove_subtree(watcher& w, const std::string& rel);
  void drop_watch(watcher& w, int wd);
  void detach(watcher& w);
  boost::asio::awaitable<void> read_loop(std::shared_ptr<boost::asio::posix::stream_descriptor> fd);
  // The events of one read, in order; false once the instance was closed on the way.
  bool dispatch_all(const char* buf, std::size_t n);
  void dispatch(const inotify_event& ev, std::string_view name);

  std::shared_ptr<boost::asio::posix::stream_descriptor> fd_;
  std::map<int, std::vector<watcher*>> subscribers_;  // watch descriptor → the watches that hold it
  std::vector<watcher*> watchers_;
};

}  // namespace sandfort::agent::watch
