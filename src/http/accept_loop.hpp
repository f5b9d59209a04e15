#pragma once
// The accept loop shared by the API server (server.cpp, TCP and Unix sockets) and the TLS front
// (tls_front.cpp): caps on open and idle connections, and paced, rate-limited accept failures.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>

#include "sandfort/http/admission.hpp"
#include "sandfort/http/server.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::http {

// A listener's open connections against its caps (admission.hpp), as the accept loop sees them:
// the HTTP server's and the TLS front's.
class admitted_connections {
 public:
  admitted_connections(boost::asio::io_context& io, listener_limits limits, connection_book::eviction_observer observer)
      : book(limits, std::move(observer)), woken_(io, boost::asio::steady_timer::time_point::max()) {}

  bool full() const { return book.open() >= book.limits().max_connections; }
  bool can_make_room() const { return !full() || book.idle_count() > 0; }
  bool make_room() { return book.make_room(); }
  std::size_t open() const { return book.open(); }
  // Wakes an accept loop paused with every connection busy: one closed, or turned idle (so it can
  // be closed to make room), or the server stops. The timer never expires: cancelling it is the
  // signal (setting its expiry again would cancel other waiters).
  void wake() { woken_.cancel(); }
  // Also after a short while: an idle connection kept from closing for a moment (a header being
  // read) may be closed then, with nothing else to say so.
  boost::asio::awaitable<void> until_woken() {
    using namespace boost::asio::experimental::awaitable_operators;
    boost::asio::steady_timer recheck(woken_.get_executor(), std::chrono::milliseconds(250));
    co_await (woken_.async_wait(use_tuple) || recheck.async_wait(use_tuple));
  }

  // A connection's place in the book from its accept to its end: counted out, and a paused
  // accept loop woken, when it goes out of scope, however the connection ends.
  class slot {
   public:
    slot(admitted_connections& owner, connection_book::ticket t) : owner_(owner), ticket_(t) {}
    slot(const slot&) = delete;
    slot& operator=(const slot&) = delete;
    ~slot() {
      owner_.book.closed(ticket_);
      owner_.wake();
    }
    connection_book::ticket ticket() const { return ticket_; }

   private:
    admitted_connections& owner_;
    connection_book::ticket ticket_;
  };
  // connection_book::opened, held by the slot returned.
  slot opened(std::string source, std::function<void()> close, std::function<bool()> has_input = {}) {
    return slot(*this, book.opened(std::move(source), std::move(close), std::move(has_input)));
  }

  connection_book book;

 private:
  boost::asio::steady_timer woken_;
};

// Accepts until the acceptor is closed or `stopping` turns true, and hands each socket to `start`
// (whose connection counts itself in `slots`, and out again when it ends). At max_connections a
// waiting connection closes the oldest idle one; with none idle, accepting pauses until woken.
template <typename Acceptor, typename Start>
boost::asio::awaitable<void> accept_connections(Acceptor& acceptor, admitted_connections& slots, accept_backoff& backoff,
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
      if (!slots.make_room()) {
        // Every idle one is kept for a moment (a header coming in): try again soon, never spin.
        co_await slots.until_woken();
        continue;
      }
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
