#pragma once
// The one place that multiplexes links home (docs/architecture.md, "The agent dials home"): each
// sandbox's idle `agent` links wait here until a call takes one. A link serves one exchange and
// is closed by whoever took it; the agent keeps a few idle and dials a new one when one is taken.
// Used on the io_context's thread only.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/http/any_stream.hpp"

namespace sandfort::home {

class link_pool {
 public:
  // At most `max_idle` idle links per sandbox: one more closes the oldest (an agent that dials
  // without end holds no more than this of ours).
  explicit link_pool(std::size_t max_idle = 8) : max_idle_(max_idle) {}

  // An agent link whose hello was read: idle until taken.
  void add(const std::string& sandbox_id, http::any_stream link);
  // An idle link of that sandbox whose agent has not closed it, waiting up to `wait` for one to
  // come; unavailable ("the sandbox's agent is not connected") when none does.
  boost::asio::awaitable<result<http::any_stream>> take(const std::string& sandbox_id, std::chrono::milliseconds wait);
  // The sandbox stopped or is gone: its idle links close and its waiting calls fail now.
  void drop(const std::string& sandbox_id);
  std::size_t idle(const std::string& sandbox_id) const;

 private:
  struct waiting_room {
    std::deque<http::any_stream> idle;
    std::list<std::shared_ptr<boost::asio::steady_timer>> waiters;
    bool dropped = false;
  };
  std::size_t max_idle_;
  std::map<std::string, waiting_room> rooms_;
};

}  // namespace sandfort::home
