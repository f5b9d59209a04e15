// Stand-alone audit events in group commits, on a thread of their own (group_writer.hpp).
#include "sandfort/audit/group_writer.hpp"

#include <boost/asio/execution/context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <algorithm>
#include <utility>
#include <vector>

namespace sandfort::audit {

namespace asio = boost::asio;

// The observer lives on the I/O thread: its pointer is read and changed there only (posted
// appends run there; observe_appends is called by the thread that runs it).
namespace detail {
struct appends_home {
  store::append_observer* observer = nullptr;
  asio::any_io_executor home;
};

// The writer connection's observer, called inside that connection's commit on the writer's
// thread: it only notes the appends; commit() posts them to the I/O thread with the batch.
class append_notes final : public store::append_observer {
 public:
  void appended(const std::string& org_id, std::int64_t seq) override { noted_.emplace_back(org_id, seq); }
  std::vector<std::pair<std::string, std::int64_t>> take() { return std::exchange(noted_, {}); }

 private:
  std::vector<std::pair<std::string, std::int64_t>> noted_;
};
}  // namespace detail

namespace {

bool same_context(const asio::any_io_executor& a, const asio::any_io_executor& b) {
  return a && b && &asio::query(a, asio::execution::context) == &asio::query(b, asio::execution::context);
}

}  // namespace

result<std::unique_ptr<group_writer>> group_writer::open(const std::string& database_path, const clock& clk,
                                                         std::size_t max_batch) {
  auto db = store::database::open(database_path);
  if (!db) return std::move(db).err();
  return std::unique_ptr<group_writer>(new group_writer(std::move(*db), clk, max_batch));
}

group_writer::group_writer(std::unique_ptr<store::database> db, const clock& clk, std::size_t max_batch)
    : db_(std::move(db)),
      journal_(*db_, clk),
      max_batch_(std::max<std::size_t>(max_batch, 1)),
      observed_(std::make_shared<detail::appends_home>()),
      notes_(std::make_unique<detail::append_notes>()),
      thread_([this] { run(); }) {
  db_->observe_appends(notes_.get());
}

group_writer::~group_writer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void group_writer::observe_appends(store::append_observer* observer, asio::any_io_executor home) {
  observed_->observer = observer;
  if (home) observed_->home = std::move(home);
}

group_writer::counts group_writer::committed() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

void group_writer::submit(pending p, bool lone) {
  {
    std::unique_lock lock(mutex_);
    if (!lone || committing_ || !queue_.empty() || stopping_) {
      queue_.push_back(std::move(p));
      lock.unlock();
      wake_.notify_one();
      return;
    }
    committing_ = true;  // the writer's thread waits until this commit is done
  }
  // The caller's thread does not wait for the write lock (another process may hold it for
  // long): taken now, or the event goes to the writer, which may wait.
  auto tx = db_->begin_if_free();
  const bool here = tx.ok();
  if (here) {
    // commit() resumes the caller through a post, never from inside this initiation.
    std::deque<pending> batch;
    batch.push_back(std::move(p));
    commit(batch, std::move(tx));
  }
  bool wake;
  {
    std::lock_guard lock(mutex_);
    committing_ = false;
    if (here)
      ++counts_.lone_commits;
    else
      queue_.push_front(std::move(p));  // ahead of anything queued meanwhile, which came after it
    wake = !queue_.empty() || stopping_;
  }
  if (wake) wake_.notify_one();
}

void group_writer::run() {
  std::deque<pending> batch;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return !committing_ && (stopping_ || !queue_.empty()); });
      if (queue_.empty()) return;  // stopping, and everything queued is committed
      // Everything queued while the previous commit ran, up to a batch.
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      committing_ = true;
    }
    commit(batch, db_->begin());
    batch.clear();
    std::lock_guard lock(mutex_);
    committing_ = false;
  }
}

void group_writer::commit(std::deque<pending>& batch, result<store::transaction> tx) {
  std::vector<result<event_record>> outcomes;
  outcomes.reserve(batch.size());
  std::size_t stored = 0;
  if (!tx) {
    for (std::size_t i = 0; i < batch.size(); ++i) outcomes.emplace_back(tx.err());
  } else {
    // An event that cannot be appended (no canonical form) fails alone: nothing of it was written.
    for (auto& p : batch) {
      outcomes.push_back(journal_.append(p.org_id, p.who, p.what));
      if (outcomes.back()) ++stored;
    }
    if (auto done = tx->commit(); !done) {
      stored = 0;
      for (auto& o : outcomes)
        if (o) o = done.err();
    }
  }
  {
    std::lock_guard lock(mutex_);
    ++counts_.commits;
    counts_.events += stored;
  }
  // One post per batch to the I/O thread (each post from another thread wakes it): the
  // observer's appends first, as when the I/O thread's own connection commits, then every caller
  // resumed in the order queued. A caller on another context is posted its own.
  struct resumed {
    done_handler done;
    result<event_record> outcome;
  };
  std::vector<resumed> home_callers;
  const asio::any_io_executor home = batch.front().home;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (same_context(batch[i].home, home)) {
      home_callers.push_back({std::move(batch[i].done), std::move(outcomes[i])});
    } else {
      asio::post(batch[i].home, [done = std::move(batch[i].done), r = std::move(outcomes[i])]() mutable {
        std::move(done)(std::move(r));
      });
    }
  }
  auto appends = notes_->take();
  auto tell = [to = observed_](const std::vector<std::pair<std::string, std::int64_t>>& noted) {
    if (to->observer == nullptr) return;
    for (const auto& [org_id, seq] : noted) to->observer->appended(org_id, seq);
  };
  if (!appends.empty() && observed_->home && !same_context(observed_->home, home)) {
    asio::post(observed_->home, [tell, appends = std::move(appends)]() mutable { tell(appends); });
    appends.clear();
  }
  asio::post(home, [tell, appends = std::move(appends), callers = std::move(home_callers)]() mutable {
    tell(appends);
    for (auto& c : callers) std::move(c.done)(std::move(c.outcome));
  });
}

}  // namespace sandfort::audit
