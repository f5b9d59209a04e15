// Idle links home, per sandbox (pool.hpp).
#include "sandfort/home/pool.hpp"

#include <sys/socket.h>

#include "sandfort/http/use_tuple.hpp"

namespace sandfort::home {

namespace asio = boost::asio;

namespace {

// An idle link is still usable when its agent has neither closed it nor said anything on it (an
// agent speaks on an agent link only to answer).
bool still_open(http::any_stream& link) {
  char byte = 0;
  ssize_t n = ::recv(link.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void wake_one(std::list<std::shared_ptr<asio::steady_timer>>& waiters) {
  if (!waiters.empty()) waiters.front()->cancel();
}

}  // namespace

void link_pool::add(const std::string& sandbox_id, http::any_stream link) {
  auto& room = rooms_[sandbox_id];
  room.dropped = false;
  room.idle.push_back(std::move(link));
  while (room.idle.size() > max_idle_) {
    room.idle.front().close();
    room.idle.pop_front();
  }
  wake_one(room.waiters);
}

asio::awaitable<result<http::any_stream>> link_pool::take(const std::string& sandbox_id,
                                                          std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto it = rooms_.find(sandbox_id);
    if (it != rooms_.end()) {
      auto& idle = it->second.idle;
      while (!idle.empty()) {
        http::any_stream link = std::move(idle.front());
        idle.pop_front();
        if (still_open(link)) {
          if (!idle.empty()) wake_one(it->second.waiters);  // more for the next in line
          co_return link;
        }
        link.close();
      }
      if (it->second.dropped) break;
    }
    if (std::chrono::steady_clock::now() >= until) break;
    // Wait for a link (add() cancels the first waiter's timer) or for the time to run out.
    auto& room = rooms_[sandbox_id];
    auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
    timer->expires_at(until);
    auto entry = room.waiters.insert(room.waiters.end(), timer);
    co_await timer->async_wait(use_tuple);
    auto again = rooms_.find(sandbox_id);  // a room with waiters stays until they leave (drop())
    again->second.waiters.erase(entry);
    if (again->second.dropped) {
      if (again->second.waiters.empty()) rooms_.erase(again);
      break;
    }
  }
  co_return make_error(errc::unavailable, "the sandbox's agent is not connected");
}

void link_pool::drop(const std::string& sandbox_id) {
  auto it = rooms_.find(sandbox_id);
  if (it == rooms_.end()) return;
  for (auto& link : it->second.idle) link.close();
  it->second.idle.clear();
  if (it->second.waiters.empty()) {
    rooms_.erase(it);
    return;
  }
  it->second.dropped = true;  // each waiter wakes, sees it, fails and leaves
  for (auto& timer : it->second.waiters) timer->cancel();
}

std::size_t link_pool::idle(const std::string& sandbox_id) const {
  auto it = rooms_.find(sandbox_id);
  return it == rooms_.end() ? 0 : it->second.idle.size();
}

}  // namespace sandfort::home
