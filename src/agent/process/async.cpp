#include "process/async.hpp"

#include <algorithm>
#include <boost/system/system_error.hpp>
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent {

namespace asio = boost::asio;

asio::awaitable<void> fifo_mutex::lock() {
  if (!locked_) {
    locked_ = true;
    co_return;
  }
  auto ex = co_await asio::this_coro::executor;
  auto me = std::make_shared<waiter>(ex);
  me->timer.expires_at(asio::steady_timer::time_point::max());
  waiters_.push_back(me);
  // Leaves the queue however the wait ends without ownership (cancelled, or the coroutine
  // destroyed while suspended); hands ownership on if it was granted but never taken up.
  struct leave_queue {
    fifo_mutex& m;
    std::shared_ptr<waiter>& w;
    bool taken = false;
    ~leave_queue() {
      if (taken) return;
      if (w->granted) {
        m.unlock();
        return;
      }
      m.waiters_.erase(std::remove(m.waiters_.begin(), m.waiters_.end(), w), m.waiters_.end());
    }
  } guard{*this, me};
  co_await me->timer.async_wait(use_tuple);
  if (!me->granted) throw boost::system::system_error(asio::error::operation_aborted);
  guard.taken = true;
}

void fifo_mutex::unlock() {
  if (!waiters_.empty()) {
    auto next = waiters_.front();
    waiters_.pop_front();
    next->granted = true;  // ownership passes directly: locked_ stays true
    next->timer.cancel();
    return;
  }
  locked_ = false;
}

asio::awaitable<void> notifier::wait(std::uint64_t seen) {
  if (version_ != seen) co_return;
  auto ex = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
  auto it = waiters_.insert(waiters_.end(), timer);
  struct leave {
    std::list<std::shared_ptr<asio::steady_timer>>& list;
    std::list<std::shared_ptr<asio::steady_timer>>::iterator it;
    bool notified = false;
    ~leave() {
      if (!notified) list.erase(it);
    }
  } guard{waiters_, it};
  co_await timer->async_wait(use_tuple);
  // notify_all() moved the list away: our entry is no longer in waiters_.
  guard.notified = timer->expiry() == asio::steady_timer::time_point::min();
}

void notifier::notify_all() {
  ++version_;
  auto woken = std::move(waiters_);
  waiters_.clear();
  for (auto& t : woken) {
    t->expires_at(asio::steady_timer::time_point::min());  // marks it as notified, and wakes it
  }
}

}  // namespace sandfort::agent
