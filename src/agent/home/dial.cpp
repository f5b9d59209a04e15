// Links home from inside the sandbox (dial.hpp).
#include "home/dial.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "sandfort/home/hello.hpp"
#include "sandfort/http/proxy.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent::home {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;
using sandfort::use_tuple;
using sandfort::home::link_kind;

namespace {

struct dialer {
  dialer(asio::io_context& ioc, dial_options o, http::server& s) : options(std::move(o)), server(s), wake(ioc) {}
  dial_options options;
  http::server& server;
  asio::steady_timer wake;  // cancelled when a link is taken or lost: time to dial again
  std::size_t idle = 0;
  std::size_t serving = 0;
  std::size_t tunnels = 0;
};

// Connected with a plain connect() and handed to Asio only then: gVisor (Debian's runsc,
// 2022) never reports a host socket readable to an epoll registration made before the socket was
// connected, and Asio registers a socket as it opens it. (Non-blocking: a full backlog at the
// door is EAGAIN, dialed again later, never a blocked agent.)
result<local::socket> connect_door(const asio::any_io_executor& executor, const std::string& door) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (door.size() >= sizeof(addr.sun_path)) return make_error(errc::invalid_argument, "door path too long: " + door);
  std::memcpy(addr.sun_path, door.c_str(), door.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return make_error(errc::unavailable, std::string("socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(errc::unavailable, "cannot reach " + door + ": " + std::strerror(e));
  }
  local::socket socket(executor);
  boost::system::error_code ec;
  socket.assign(local(), fd, ec);
  if (ec) {
    ::close(fd);
    return make_error(errc::unavailable, "cannot use the link: " + ec.message());
  }
  return socket;
}

asio::awaitable<result<http::any_stream>> dial(const std::string& door, link_kind kind) {
  auto socket = connect_door(co_await asio::this_coro::executor, door);
  if (!socket) co_return std::move(socket).err();
  http::any_stream link(std::move(*socket));
  if (auto said = co_await sandfort::home::write_hello(link, kind); !said) co_return std::move(said).err();
  co_return link;
}

// An idle link: its first bytes are a call (or its end: sandfortd closed it), which the server
// serves with its header timeout starting now.
asio::awaitable<void> wait_for_call(std::shared_ptr<dialer> d, http::any_stream link) {
  auto [ec] = co_await link.async_wait_readable(use_tuple);
  --d->idle;
  ++d->serving;
  d->wake.cancel();
  if (!ec) {
    // Made first: GCC 12 mishandles temporaries inside a co_await expression.
    auto serving = d->server.serve(std::move(link), http::peer{"sandfortd", 0});
    co_await std::move(serving);
  }
  --d->serving;
  d->wake.cancel();
}

asio::awaitable<void> keep_dialing(std::shared_ptr<dialer> d) {
  auto executor = co_await asio::this_coro::executor;
  auto backoff = std::chrono::milliseconds(50);
  bool said_unreachable = false;
  for (;;) {
    bool failed = false;
    while (d->idle < d->options.idle_target && d->idle + d->serving < d->options.max_links) {
      auto link = co_await dial(d->options.door, link_kind::agent);
      if (!link) {
        if (!said_unreachable) std::fprintf(stderr, "sandfort-agent: %s; dialing again\n", link.err().message.c_str());
        said_unreachable = true;
        failed = true;
        break;
      }
      said_unreachable = false;
      backoff = std::chrono::milliseconds(50);
      ++d->idle;
      asio::co_spawn(executor, wait_for_call(d, std::move(*link)), asio::detached);
    }
    if (failed) {
      asio::steady_timer pause(executor);
      pause.expires_after(backoff);
      co_await pause.async_wait(use_tuple);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
      continue;
    }
    d->wake.expires_at(asio::steady_timer::time_point::max());
    co_await d->wake.async_wait(use_tuple);
  }
}

// One egress client: its bytes go home over a tunnel link of their own, both ways, unchanged.
asio::awaitable<void> tunnel(std::shared_ptr<dialer> d, asio::ip::tcp::socket client_socket) {
  http::any_stream client(std::move(client_socket));
  ++d->tunnels;
  auto link = co_await dial(d->options.door, link_kind::tunnel);
  if (link) co_await http::splice_streams(client, *link);
  --d->tunnels;
}

asio::awaitable<void> accept_egress(std::shared_ptr<dialer> d, asio::ip::tcp::acceptor acceptor) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer pause(executor);
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      pause.expires_after(std::chrono::milliseconds(100));  // out of descriptors: no spinning
      co_await pause.async_wait(use_tuple);
      continue;
    }
    if (d->tunnels >= d->options.max_tunnels) continue;  // closed as `socket` goes
    asio::co_spawn(executor, tunnel(d, std::move(socket)), asio::detached);
  }
}

}  // namespace

result<unsigned short> dial_home(asio::io_context& ioc, dial_options options, http::server& server) {
  auto d = std::make_shared<dialer>(ioc, std::move(options), server);
  unsigned short egress_port = 0;
  if (!d->options.egress_listen.empty()) {
    auto acceptor = http::listen_on(ioc, d->options.egress_listen);
    if (!acceptor) return std::move(acceptor).err();
    egress_port = acceptor->local_endpoint().port();
    asio::co_spawn(ioc, accept_egress(d, std::move(*acceptor)), asio::detached);
  }
  asio::co_spawn(ioc, keep_dialing(d), asio::detached);
  return egress_port;
}

}  // namespace sandfort::agent::home
