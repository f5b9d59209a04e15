#pragma once
// The accept loop shared by the API server (server.cpp, TCP and Unix sockets) and the TLS front
// (tls_front.cpp): a cap on open connections, and paced, rate-limited accept failures.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <string>
#include <utility>

#include "sandfort/http/server.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::http {

// A listener's open connections against its cap. The accept loop counts a connection in as soon
// as it is accepted (so the cap sees it at once); the connection counts itself out when it ends
// (a `release`), which wakes an accept loop paused at the cap.
class connection_slots {
 public:
  connection_slots(boost::asio::io_context& io, std::size_t max)
      : max_(max), slot_freed_(io, boost::asio::steady_timer::time_point::max()) {}

  std::size_t open() const { return open_; }
  bool full() const { return open_ >= max_; }
  bool can_make_room() const { return !full(); }
  bool make_room() const { return !full(); }
  void opened() { ++open_; }
  void closed() {
    --open_;
    wake();
  }
  // Wakes accept loops paused at the cap (a slot freed, or the listener stopping). The timer never
  // expires: cancelling it is the signal (setting its expiry again would cancel other waiters).
  void wake() { slot_freed_.cancel(); }
  boost::asio::awaitable<void> until_woken() {
    co_await slot_freed_.async_wait(use_tuple);
  }

  // Held by a connection for its lifetime.
  class release {
   public:
    explicit release(connection_slots& slots) : slots_(slots) {}
    release(const release&) = delete;
    release& operator=(const release&) = delete;
    ~release() { slots_.closed(); }

   private:
    connection_slots& slots_;
  };

 private:
  std::size_t max_;
  std::size_t open_ = 0;
  boost::asio::steady_timer slot_freed_;
};

// Accepts until the acceptor is closed or `stopping` turns true, and hands each socket to `start`
// (which counts it in `slots` and out again when the connection ends). `Slots` is
// connection_slots or, on the HTTP server, its book of idle and busy connections: at the cap,
// can_make_room() says whether an idle connection could be closed for a new one, and
// make_room() closes it, once a connection is waiting; until_woken() waits for a slot to free.
template <typename Acceptor, typename Slots, typename Start>
boost::asio::awaitable<void> accept_connections(Acceptor& acceptor, Slots& slots, accept_backoff& backoff,
                                                const bool& stopping, Start start) {
  while (!stopping) {
    if (!slots.can_make_room()) {
      backoff.warn_limited(std::to_string(slots.open()) +
                           " connections open, none idle (max_connections): accepting paused until one closes");
      co_await slots.until_woken();
      continue;
    }
    if (slots.full()) {
      // Nothing is closed for a connection that is not there: wait for one first.
      auto [wec] = co_await acceptor.async_wait(Acceptor::wait_read, use_tuple);
      if (wec || stopping || !acceptor.is_open()) {
        if (wec == boost::asio::error::operation_aborted || !acceptor.is_open() || stopping) break;
        co_await backoff.after(wec);
        continue;
      }
      if (!slots.make_room()) continue;
    }
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) {
      if (ec == boost::asio::error::operation_aborted || !acceptor.is_open() || stopping) break;
      co_await backoff.after(ec);
      continue;
    }
    start(std::move(socket));
  }
}

}  // namespace sandfort::http
