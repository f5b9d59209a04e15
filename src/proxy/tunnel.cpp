#include "tunnel.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <algorithm>
#include <vector>
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::proxy::detail {

namespace asio = boost::asio;
using asio::ip::tcp;
using clock = std::chrono::steady_clock;

namespace {

// Every open tunnel holds two pieces (128 KiB); 16 KiB ones would cost a bulk download (a
// package mirror on the LAN) four times the system calls.
constexpr std::size_t piece = 64 * 1024;
constexpr std::size_t status_line_bytes = 16;

void close_both(tunnel& t) {
  t.closed = true;
  boost::system::error_code ignored;
  t.client.close(ignored);
  t.upstream.close(ignored);
}

asio::awaitable<void> pump(tunnel& t, http::any_stream::socket_type& from, http::any_stream::socket_type& to,
                           std::uint64_t& count) {
  bool from_upstream = &from == &t.upstream;
  std::vector<char> chunk(piece);
  for (;;) {
    auto [ec, n] = co_await from.async_read_some(asio::buffer(chunk), use_tuple);
    if (ec) {
      bool clean_end = ec == asio::error::eof;
      if (!clean_end && !t.closed) t.reset = true;
      if (!clean_end || (from_upstream && t.end_with_upstream)) close_both(t);
      break;
    }
    t.last_activity = clock::now();
    if (from_upstream && t.response_start.size() < status_line_bytes)
      t.response_start.append(chunk.data(), std::min(n, status_line_bytes - t.response_start.size()));
    auto [wec, wn] = co_await asio::async_write(to, asio::buffer(chunk.data(), n), use_tuple);
    count += wn;
    if (wec) {
      if (!t.closed) t.reset = true;
      close_both(t);
      break;
    }
    t.last_activity = clock::now();
  }
  boost::system::error_code ignored;
  to.shutdown(asio::socket_base::shutdown_send, ignored);
}

// Completes when the tunnel has been idle for its timeout (closing it), or when cancelled
// because the pumps finished first.
asio::awaitable<void> watch_idle(tunnel& t) {
  // A year is "never", and keeps last_activity + idle from overflowing.
  auto idle = std::min<std::chrono::milliseconds>(t.idle_timeout, std::chrono::hours(24 * 365));
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_at(t.last_activity + idle);
    auto [ec] = co_await timer.async_wait(use_tuple);
    if (ec) co_return;
    if (clock::now() >= t.last_activity + idle) {
      t.idle = true;
      close_both(t);
      co_return;
    }
  }
}

}  // namespace

asio::awaitable<void> splice(tunnel& t) {
  using namespace asio::experimental::awaitable_operators;
  t.last_activity = clock::now();
  // Named first: GCC 12 mishandles temporaries with destructors inside a co_await expression.
  auto up = pump(t, t.client, t.upstream, t.bytes_out);
  auto down = pump(t, t.upstream, t.client, t.bytes_in);
  auto both = std::move(up) && std::move(down);
  auto watched = std::move(both) || watch_idle(t);
  co_await std::move(watched);
  close_both(t);
}

}  // namespace sandfort::proxy::detail
