#include "sandfort/firewall/host_firewall.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sandfort::firewall {

namespace asio = boost::asio;

namespace {

// co_spawn onto the pool runs fn there; awaiting it with use_awaitable resumes the caller on
// its own executor, so nothing else of the caller's ever runs on the pool's thread.
template <typename Fn>
asio::awaitable<result<void>> on_pool(asio::thread_pool& pool, Fn fn) {
  co_return co_await asio::co_spawn(
      pool, [fn]() -> asio::awaitable<result<void>> { co_return fn(); }, asio::use_awaitable);
}

}  // namespace

firewall_worker::firewall_worker() : pool_(1) {}

firewall_worker::~firewall_worker() { pool_.join(); }

asio::awaitable<result<void>> firewall_worker::install(host_firewall& fw) {
  return on_pool(pool_, [&fw] { return fw.install(); });
}

asio::awaitable<result<void>> firewall_worker::remove(host_firewall& fw) {
  return on_pool(pool_, [&fw] { return fw.remove(); });
}

}  // namespace sandfort::firewall
