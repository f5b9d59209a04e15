#pragma once
// Two small coordination tools for coroutines on one io_context (one thread, so no locks):
// a mutex that hands ownership to waiters strictly in arrival order, and a notifier that wakes
// everyone waiting for "something changed". Both wait on timers that never expire and are
// woken by cancel(): no polling.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>

namespace sandfort::agent {

class fifo_mutex {
 public:
  // Completes once the caller owns the mutex (in the order lock() was called).
  boost::asio::awaitable<void> lock();
  void unlock();
  bool locked() const { return locked_; }
  std::size_t waiting() const { return waiters_.size(); }

 private:
  struct waiter {
    explicit waiter(const boost::asio::any_io_executor& ex) : timer(ex) {}
    boost::asio::steady_timer timer;
    bool granted = false;
  };
  bool locked_ = false;
  std::deque<std::shared_ptr<waiter>> waiters_;
};

// Unlocks on scope exit.
class fifo_lock {
 public:
  explicit fifo_lock(fifo_mutex& m) : m_(&m) {}
  fifo_lock(const fifo_lock&) = delete;
  fifo_lock& operator=(const fifo_lock&) = delete;
  ~fifo_lock() {
    if (m_) m_->unlock();
  }

 private:
  fifo_mutex* m_;
};

// Versioned, so that a change between looking at the state and waiting is never lost:
// read version(), look, then wait(seen) — it returns at once if anything changed since.
class notifier {
 public:
  std::uint64_t version() const { return version_; }
  // Completes once version() differs from seen (or when cancelled).
  boost::asio::awaitable<void> wait(std::uint64_t seen);
  boost::asio::awaitable<void> wait() { return wait(version_); }
  void notify_all();

 private:
  std::uint64_t version_ = 0;
  std::list<std::shared_ptr<boost::asio::steady_timer>> waiters_;
};

}  // namespace sandfort::agent
