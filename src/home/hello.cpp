// The hello of a link home (hello.hpp): one short line, read without reading past it.
#include "sandfort/home/hello.hpp"

#include <array>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "sandfort/http/use_tuple.hpp"

namespace sandfort::home {

namespace asio = boost::asio;
using sandfort::use_tuple;

namespace {
constexpr std::string_view prefix = "SANDFORT-HOME/1 ";
}

std::string hello_line(link_kind kind) {
  return std::string(prefix) + (kind == link_kind::agent ? "agent" : "tunnel") + "\n";
}

result<link_kind> parse_hello(std::string_view line) {
  if (line.starts_with(prefix)) {
    auto kind = line.substr(prefix.size());
    if (kind == "agent") return link_kind::agent;
    if (kind == "tunnel") return link_kind::tunnel;
  }
  return make_error(errc::invalid_argument, "not a link hello");
}

// The hello's bytes are taken off the socket only once it is certain they are the hello's: what
// has come is peeked at, and read for real up to the newline (or all of it when there is no
// newline yet, since every byte before the newline is the hello's). So the next layer — a proxy
// request that the tunnel's client sent at once — starts exactly where it should.
asio::awaitable<result<link_kind>> read_hello(http::any_stream& link, std::chrono::milliseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  const auto refused = make_error(errc::invalid_argument, "the link's first line is not a hello");
  auto& socket = link.socket();
  boost::system::error_code ec;
  socket.non_blocking(true, ec);
  if (ec) co_return make_error(errc::unavailable, "link: " + ec.message());
  asio::steady_timer deadline(link.get_executor());
  deadline.expires_after(timeout);
  std::string line;
  std::array<char, max_hello_bytes> peeked{};
  for (;;) {
    auto which = co_await (link.async_wait_readable(use_tuple) || deadline.async_wait(use_tuple));
    if (which.index() == 1) co_return make_error(errc::unavailable, "no hello within the time allowed");
    if (auto [wait_ec] = std::get<0>(which); wait_ec) co_return make_error(errc::unavailable, "link: " + wait_ec.message());
    const std::size_t room = max_hello_bytes - line.size();
    std::size_t n = socket.receive(asio::buffer(peeked.data(), room), asio::socket_base::message_peek, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) continue;
    if (ec || n == 0) co_return make_error(errc::unavailable, "the link closed before its hello");
    std::string_view seen(peeked.data(), n);
    const auto newline = seen.find('\n');
    const std::size_t take = newline == std::string_view::npos ? n : newline + 1;
    if (newline == std::string_view::npos && line.size() + n >= max_hello_bytes) co_return refused;
    std::size_t got = socket.receive(asio::buffer(peeked.data(), take), 0, ec);
    if (ec || got != take) co_return make_error(errc::unavailable, "the link failed during its hello");
    line.append(peeked.data(), take);
    if (newline != std::string_view::npos) {
      line.pop_back();
      auto kind = parse_hello(line);
      if (!kind) co_return refused;
      co_return *kind;
    }
  }
}

asio::awaitable<result<void>> write_hello(http::any_stream& link, link_kind kind) {
  const std::string line = hello_line(kind);
  auto [ec, n] = co_await asio::async_write(link, asio::buffer(line), use_tuple);
  if (ec) co_return make_error(errc::unavailable, "cannot send the hello: " + ec.message());
  co_return result<void>{};
}

}  // namespace sandfort::home
