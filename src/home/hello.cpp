// The hello of a link home (hello.hpp): one short line, read without reading past it.
#include "sandfort/home/hello.hpp"

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

// What a link's next layer sends first is peeked at, and read for real only up to the end of
// the part being read (or all of it when that end has not come yet, since every byte before it
// is the part's). So the next layer — a proxy request that the tunnel's client sent at once, an
// application's first bytes after a port's 101 — starts exactly where it should.
asio::awaitable<result<std::string>> read_exactly_through(http::any_stream& link, std::string_view delimiter,
                                                          std::size_t max_bytes, std::chrono::milliseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  auto& socket = link.socket();
  boost::system::error_code ec;
  socket.non_blocking(true, ec);
  if (ec) co_return make_error(errc::unavailable, "link: " + ec.message());
  asio::steady_timer deadline(link.get_executor());
  deadline.expires_after(timeout);
  std::string part;
  std::string peeked(max_bytes, '\0');
  for (;;) {
    auto which = co_await (link.async_wait_readable(use_tuple) || deadline.async_wait(use_tuple));
    if (which.index() == 1) co_return make_error(errc::unavailable, "the link said nothing within the time allowed");
    if (auto [wait_ec] = std::get<0>(which); wait_ec) co_return make_error(errc::unavailable, "link: " + wait_ec.message());
    const std::size_t room = max_bytes - part.size();
    std::size_t n = socket.receive(asio::buffer(peeked.data(), room), asio::socket_base::message_peek, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) continue;
    if (ec || n == 0) co_return make_error(errc::unavailable, "the link closed early");
    // The delimiter may straddle what was read before and what is peeked now.
    const std::size_t from = part.size() >= delimiter.size() ? part.size() - delimiter.size() + 1 : 0;
    std::string seen = part;
    seen.append(peeked.data(), n);
    const auto end = seen.find(delimiter, from);
    const std::size_t take = end == std::string::npos ? n : end + delimiter.size() - part.size();
    if (end == std::string::npos && part.size() + n >= max_bytes)
      co_return make_error(errc::invalid_argument, "the link sent more than " + std::to_string(max_bytes) + " bytes");
    std::size_t got = socket.receive(asio::buffer(peeked.data(), take), 0, ec);
    if (ec || got != take) co_return make_error(errc::unavailable, "the link failed while being read");
    part.append(peeked.data(), take);
    if (end != std::string::npos) co_return part;
  }
}

asio::awaitable<result<link_kind>> read_hello(http::any_stream& link, std::chrono::milliseconds timeout) {
  auto line = co_await read_exactly_through(link, "\n", max_hello_bytes, timeout);
  if (!line && line.err().code == errc::unavailable) co_return std::move(line).err();
  if (!line) co_return make_error(errc::invalid_argument, "the link's first line is not a hello");
  line->pop_back();
  auto kind = parse_hello(*line);
  if (!kind) co_return make_error(errc::invalid_argument, "the link's first line is not a hello");
  co_return *kind;
}

asio::awaitable<result<void>> write_hello(http::any_stream& link, link_kind kind) {
  const std::string line = hello_line(kind);
  auto [ec, n] = co_await asio::async_write(link, asio::buffer(line), use_tuple);
  if (ec) co_return make_error(errc::unavailable, "cannot send the hello: " + ec.message());
  co_return result<void>{};
}

}  // namespace sandfort::home
