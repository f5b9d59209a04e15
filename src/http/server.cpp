#include "sandfort/http/server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <list>
#include <type_traits>
#include <unistd.h>

#include "sandfort/core/ids.hpp"

namespace sandfort::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using unix_socket = asio::local::stream_protocol;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct server::state {
  asio::io_context& ioc;
  server_options options;
  handler root;
  bool stopping = false;
  std::list<std::function<void()>> closers;  // closes one idle connection each
  std::size_t connections = 0;
  std::vector<std::function<void()>> acceptor_closers;
  stream_selector<tcp_protocol> tcp_streams;
  stream_selector<unix_protocol> unix_streams;

  template <typename Protocol>
  const stream_selector<Protocol>& streams() const {
    if constexpr (std::is_same_v<Protocol, tcp_protocol>)
      return tcp_streams;
    else
      return unix_streams;
  }

  state(asio::io_context& io, server_options o, handler h) : ioc(io), options(std::move(o)), root(std::move(h)) {}
};

namespace {

template <typename Protocol>
using stream_t = beast::basic_stream<Protocol>;

response handle_bad_request(const std::string& message, const std::string& request_id, errc code) {
  return error_response(make_error(code, message), request_id);
}

// Waits until the socket has bytes to read, the idle timeout passes, or the server stops.
template <typename Socket>
asio::awaitable<bool> wait_readable(Socket& socket, std::chrono::milliseconds idle) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(socket.get_executor());
  timer.expires_after(idle);
  auto which = co_await (socket.async_wait(Socket::wait_read, use_tuple) || timer.async_wait(use_tuple));
  if (which.index() != 0) co_return false;
  auto [ec] = std::get<0>(which);
  co_return !ec;
}

// After answering early (413, malformed request) the client may still be sending: read and
// drop its bytes for a while so it gets to read our answer instead of a reset.
template <typename Stream>
asio::awaitable<void> discard_input(Stream& stream) {
  std::vector<char> sink(64 * 1024);
  std::size_t total = 0;
  stream.expires_after(std::chrono::seconds(5));
  while (total < (256u << 20)) {
    auto [ec, n] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
    if (ec) break;
    total += n;
  }
}

template <typename Protocol>
asio::awaitable<void> run_session(std::shared_ptr<server::state> st, typename Protocol::socket socket) {
  ++st->connections;
  struct release {
    server::state& s;
    ~release() { --s.connections; }
  } on_exit{*st};

  stream_t<Protocol> stream(std::move(socket));
  beast::flat_buffer buffer;
  auto closer = st->closers.insert(st->closers.end(), [&stream] {
    beast::error_code ignored;
    stream.socket().cancel(ignored);
  });
  struct unregister {
    server::state& s;
    std::list<std::function<void()>>::iterator it;
    ~unregister() { s.closers.erase(it); }
  } drop{*st, closer};

  bool linger = false;  // we answered before reading the whole request
  while (!st->stopping) {
    if (buffer.size() == 0 && !co_await wait_readable(stream.socket(), st->options.idle_timeout)) break;
    if (st->stopping) break;

    std::string request_id = "req-" + random_hex(8);
    // The header first: a streamed route takes the body in pieces, any other gets it whole.
    bhttp::request_parser<bhttp::empty_body> head_parser;
    head_parser.body_limit(boost::none);
    head_parser.header_limit(64 * 1024);

    stream.expires_after(st->options.header_timeout);
    auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, head_parser, use_tuple);
    if (!hec && st->options.trust_request_id) {
      if (auto given = head_parser.get().find("X-Request-Id"); given != head_parser.get().end() &&
                                                               given->value().size() <= 64 && !given->value().empty())
        request_id = std::string(given->value());
    }
    if (!hec) {
      std::string path;
      std::map<std::string, std::string> query, params;
      split_target(head_parser.get().target(), path, query);
      const auto& select = st->streams<Protocol>();
      if (auto handler = select ? select(head_parser.get().base(), path, params) : stream_handler<Protocol>{}) {
        bhttp::request_parser<bhttp::buffer_body> body_parser{std::move(head_parser)};
        exchange<Protocol> ex{stream, buffer, body_parser, request_id, path, query, params};
        stream.expires_never();
        bool keep = false;
        try {
          keep = co_await handler(ex);
        } catch (const std::exception& e) {
          keep = false;
        }
        if (!keep) break;
        continue;
      }
    }
    bhttp::request_parser<bhttp::string_body> parser{std::move(head_parser)};
    parser.body_limit(st->options.body_limit);
    response res;
    bool close_after = false;
    linger = false;
    if (hec) {
      if (hec == bhttp::error::end_of_stream || hec == beast::error::timeout || hec == asio::error::operation_aborted ||
          buffer.size() == 0)
        break;
      res = handle_bad_request("malformed HTTP request: " + hec.message(), request_id, errc::invalid_argument);
      close_after = true;
      linger = true;
    } else if (auto len = parser.content_length(); len && *len > st->options.body_limit) {
      res = handle_bad_request("request body of " + std::to_string(*len) + " bytes exceeds the limit of " +
                                   std::to_string(st->options.body_limit),
                               request_id, errc::payload_too_large);
      close_after = true;
      linger = true;
    } else {
      stream.expires_after(st->options.idle_timeout);
      auto [bec, bn] = co_await bhttp::async_read(stream, buffer, parser, use_tuple);
      if (bec == bhttp::error::body_limit) {
        res = handle_bad_request("request body exceeds the limit of " + std::to_string(st->options.body_limit) +
                                     " bytes",
                                 request_id, errc::payload_too_large);
        close_after = true;
        linger = true;
      } else if (bec) {
        break;
      } else {
        context ctx;
        ctx.req = parser.release();
        ctx.request_id = request_id;
        split_target(ctx.req.target(), ctx.path, ctx.query);
        stream.expires_never();
        try {
          res = co_await st->root(ctx);
        } catch (const std::exception& ex) {
          res = handle_bad_request(std::string("internal error: ") + ex.what(), request_id, errc::internal);
        }
        close_after = !ctx.req.keep_alive();
      }
    }
    res.set(bhttp::field::server, st->options.server_name);
    res.set("X-Request-Id", request_id);
    res.keep_alive(!close_after && !st->stopping);
    if (!res.has_content_length() && !res.chunked()) res.prepare_payload();
    stream.expires_after(st->options.idle_timeout);
    auto [wec, wn] = co_await bhttp::async_write(stream, res, use_tuple);
    if (wec || !res.keep_alive()) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(Protocol::socket::shutdown_send, ignored);
  if (linger) co_await discard_input(stream);
  stream.socket().close(ignored);
}

template <typename Protocol>
asio::awaitable<void> accept_loop(std::shared_ptr<server::state> st, typename Protocol::acceptor acceptor) {
  auto acc = std::make_shared<typename Protocol::acceptor>(std::move(acceptor));
  st->acceptor_closers.push_back([acc] {
    beast::error_code ignored;
    acc->close(ignored);
  });
  while (!st->stopping) {
    auto [ec, socket] = co_await acc->async_accept(use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acc->is_open()) break;
      continue;  // EMFILE and friends: keep serving the connections we have
    }
    if constexpr (std::is_same_v<Protocol, tcp>) {
      // Responses go out as header and body writes (and streams as many small ones): without
      // this, Nagle plus the client's delayed ACK add 40 ms to each.
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
    }
    asio::co_spawn(st->ioc, run_session<Protocol>(st, std::move(socket)), asio::detached);
  }
}

}  // namespace

server::server(asio::io_context& ioc, server_options options, handler root)
    : state_(std::make_shared<state>(ioc, std::move(options), std::move(root))) {}

server::~server() { stop(); }

result<unsigned short> server::listen_tcp(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  if (colon == std::string::npos) return make_error(errc::invalid_argument, "listen address must be HOST:PORT");
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  beast::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return make_error(errc::invalid_argument, "bad listen host '" + host + "'");
  unsigned long port = 0;
  try {
    port = std::stoul(host_port.substr(colon + 1));
  } catch (const std::exception&) {
    port = 65536;
  }
  if (port > 65535) return make_error(errc::invalid_argument, "bad listen port in '" + host_port + "'");
  tcp::acceptor acceptor(state_->ioc);
  tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return make_error(errc::unavailable, "cannot listen on " + host_port + ": " + ec.message());
  unsigned short bound = acceptor.local_endpoint().port();
  asio::co_spawn(state_->ioc, accept_loop<tcp>(state_, std::move(acceptor)), asio::detached);
  return bound;
}

void server::set_stream_selector(stream_selector<tcp_protocol> selector) { state_->tcp_streams = std::move(selector); }
void server::set_stream_selector(stream_selector<unix_protocol> selector) { state_->unix_streams = std::move(selector); }

result<void> server::listen_unix(const std::string& path) {
  ::unlink(path.c_str());
  beast::error_code ec;
  unix_socket::acceptor acceptor(state_->ioc);
  unix_socket::endpoint ep(path);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return make_error(errc::unavailable, "cannot listen on " + path + ": " + ec.message());
  asio::co_spawn(state_->ioc, accept_loop<unix_socket>(state_, std::move(acceptor)), asio::detached);
  return {};
}

void server::stop() {
  if (state_->stopping) return;
  state_->stopping = true;
  for (auto& close : state_->acceptor_closers) close();
  // Only connections waiting for a request are cancelled; one inside a handler finishes it.
  for (auto& close : state_->closers) close();
}

std::size_t server::active_connections() const { return state_->connections; }

asio::awaitable<void> server::drain(std::chrono::milliseconds deadline) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto until = std::chrono::steady_clock::now() + deadline;
  while (state_->connections > 0 && std::chrono::steady_clock::now() < until) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(use_tuple);
  }
}

}  // namespace sandfort::http
