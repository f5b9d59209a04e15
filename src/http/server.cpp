#include "sandfort/http/server.hpp"

#include "accept_loop.hpp"

#include <boost/asio/as_tuple.hpp>
#include <algorithm>
#include <cctype>
#include <string_view>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <cerrno>
#include <list>
#include <type_traits>
#include <unistd.h>

#include "sandfort/core/ids.hpp"
#include "sandfort/http/admission.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using unix_socket = asio::local::stream_protocol;

struct server::state {
  // One open connection, as stop() and abort() see it.
  struct session_entry {
    std::function<void(bool)> cut;  // false: cancel its wait; true: shut the socket down too
    bool busy = false;              // a request's header has been read: stop() lets it finish
  };

  asio::io_context& ioc;
  server_options options;
  handler root;
  bool stopping = false;
  std::list<session_entry> sessions;
  std::vector<std::function<void()>> acceptor_closers;
  stream_selector streams;
  accept_backoff backoff;
  refusal_log evictions_log{std::chrono::seconds(5)};
  admitted_connections slots;

  state(asio::io_context& io, server_options o, handler h)
      : ioc(io),
        options(std::move(o)),
        root(std::move(h)),
        backoff(options.listener_name, options.log_warning),
        slots(io, {options.max_connections, options.max_idle_per_source, options.max_idle},
              [this](const std::string& source, connection_book::reason why) { log_eviction(source, why); }) {}

  // At most one line per source (per cap, for the others) per period, with the count since the last.
  void log_eviction(const std::string& source, connection_book::reason why) {
    using reason = connection_book::reason;
    if (!options.log_warning) return;
    const std::string key = why == reason::source_cap ? source : why == reason::idle_cap ? "idle cap" : "connection cap";
    auto count = evictions_log.note(key, std::chrono::steady_clock::now());
    if (!count) return;
    std::string line = options.listener_name + ": closed " + std::to_string(*count) + " idle connection(s)";
    const std::string& key_prefix = options.config_prefix;
    if (why == reason::source_cap)
      line += " of " + source + " to make room: " + std::to_string(options.max_idle_per_source) +
              " connections from this source have no complete request (" + key_prefix +
              "max_idle_connections_per_source)";
    else if (why == reason::idle_cap)
      line += " to make room: " + std::to_string(options.max_idle) + " connections have no complete request (" +
              key_prefix + "max_idle_connections)";
    else
      line += " to make room: " + std::to_string(options.max_connections) + " connections are open (" + key_prefix +
              "max_connections)";
    options.log_warning(line);
  }
};

namespace {

response handle_bad_request(const std::string& message, const std::string& request_id, errc code) {
  return error_response(make_error(code, message), request_id);
}

constexpr std::size_t max_header_bytes = read_buffer_limit;
// Past a request's header the read buffer holds no more than this: a chunk's header line with
// its extensions, or the trailer, must fit (Node.js allows a chunk's extensions as much since
// CVE-2024-22019), and Beast's parsing of them again on every read costs at most this much.
constexpr std::size_t max_chunk_framing_bytes = 16 * 1024;

template <typename Socket>
peer peer_of(const Socket& socket) {
  if constexpr (std::is_same_v<typename Socket::protocol_type, asio::ip::tcp>) {
    beast::error_code ec;
    auto endpoint = socket.remote_endpoint(ec);
    return ec ? peer{} : peer{endpoint.address().to_string(), endpoint.port()};
  } else {
    return peer{"unix", 0};
  }
}

// The request's client as the listener's policy sees it (a trusted proxy's X-Forwarded-For, the
// client behind the TLS front); the TCP peer itself without one.
template <typename Fields>
std::string client_of(const server_options& options, const peer& from, const Fields& fields) {
  if (!options.client_address) return from.address;
  // Several header lines are one list, in order (RFC 9110 5.3): a proxy that adds a line of its
  // own instead of appending to the client's must not leave the client's line as the last word.
  std::string forwarded;
  for (auto [it, end] = fields.equal_range("X-Forwarded-For"); it != end; ++it) {
    if (!forwarded.empty()) forwarded += ", ";
    forwarded += it->value();
  }
  return options.client_address(from, forwarded);
}

// Whether field `name` takes at least half of the header limit in what was read of a header
// that exceeded it (the parser may already have consumed the request line). Only one field can.
bool oversized_field_is(const beast::flat_buffer& buf, std::string_view name) {
  std::string_view bytes(static_cast<const char*>(buf.data().data()), buf.size());
  for (std::size_t start = 0; start < bytes.size();) {
    auto end = std::min(bytes.find('\n', start), bytes.size());
    std::string_view line = bytes.substr(start, end - start);
    if (line.empty() || line == "\r") return false;  // the end of the header
    if (line.size() >= max_header_bytes / 2 && line.size() > name.size() && line[name.size()] == ':') {
      bool same = true;
      for (std::size_t i = 0; i < name.size() && same; ++i)
        same = std::tolower(static_cast<unsigned char>(line[i])) == name[i];
      return same;
    }
    start = end + 1;
  }
  return false;
}

// How long a header whose bytes started coming is kept from being closed for room (see run_session).
constexpr std::chrono::milliseconds reading_grace{250};

// The source a connection's idle slot counts against; "" for a trusted proxy.
std::string idle_source_of(const server_options& options, const peer& from) {
  std::string source = options.idle_source ? options.idle_source(from) : from.address;
  return source.empty() ? source : source_key(source);
}

// Waits until the socket has bytes to read, the idle timeout passes, or the server stops.
asio::awaitable<bool> wait_readable(any_stream& stream, std::chrono::milliseconds idle) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(stream.get_executor());
  timer.expires_after(idle);
  auto which = co_await (stream.async_wait_readable(use_tuple) || timer.async_wait(use_tuple));
  if (which.index() != 0) co_return false;
  auto [ec] = std::get<0>(which);
  co_return !ec;
}

// After answering early (413, malformed request) the client may still be sending: read and
// drop its bytes for a while so it gets to read our answer instead of a reset.
asio::awaitable<void> discard_input(any_stream& stream) {
  std::vector<char> sink(64 * 1024);
  std::size_t total = 0;
  stream.expires_after(std::chrono::seconds(5));
  while (total < (256u << 20)) {
    auto [ec, n] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
    if (ec) break;
    total += n;
  }
}

// Counts itself in the listener's book, and out when it ends (which wakes a paused acceptor).
asio::awaitable<void> run_session(std::shared_ptr<server::state> st, any_stream stream, const peer from) {
  const auto accepted = std::chrono::steady_clock::now();
  beast::flat_buffer buffer = bounded_read_buffer();
  // The header being read, and since when bytes of it come. A burst of requests from one client
  // arrives as many connections at once, each idle until its header is parsed, and Asio reads a
  // socket before it runs the parse: for that moment no byte shows anywhere. So a header whose
  // bytes started coming less than `reading_grace` ago, or that is complete, or bytes still in
  // the socket, keep a connection from being closed for room. A slowloris passes the grace in
  // a moment and is a candidate again.
  const bhttp::request_parser<bhttp::empty_body>* reading = nullptr;
  auto reading_since = std::chrono::steady_clock::time_point{};
  // Idle (closed to make room when the listener needs it) until its request header is complete.
  auto& book = st->slots.book;
  const auto slot = st->slots.opened(
      idle_source_of(st->options, from), [&stream] { stream.close(); },
      [&stream, &reading, &reading_since] {
        if (reading && (reading->is_header_done() || std::chrono::steady_clock::now() - reading_since < reading_grace))
          return true;
        beast::error_code ec;
        return stream.socket().available(ec) > 0;
      });
  const auto ticket = slot.ticket();

  auto entry = st->sessions.insert(st->sessions.end(), server::state::session_entry{[&stream](bool force) {
                                     beast::error_code ignored;
                                     if (force) stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
                                     stream.socket().cancel(ignored);
                                   }});
  struct unregister {
    server::state& s;
    std::list<server::state::session_entry>::iterator it;
    ~unregister() { s.sessions.erase(it); }
  } drop{*st, entry};

  bool linger = false;  // we answered before reading the whole request
  bool first = true;
  while (!st->stopping) {
    // Between requests the connection is idle: stop() closes it, and so may the next connection.
    entry->busy = false;
    book.idle(ticket);
    st->slots.wake();
    // The first request's header is due within header_timeout of the accept, silence included;
    // a later one's within header_timeout of its first byte.
    auto head_time = st->options.header_timeout;
    if (buffer.size() == 0) {
      const auto waited_from = first ? accepted : std::chrono::steady_clock::now();
      if (!co_await wait_readable(stream, first ? head_time : st->options.idle_timeout)) break;
      reading_since = std::chrono::steady_clock::now();
      if (first)
        head_time = std::max<std::chrono::milliseconds>(
            std::chrono::milliseconds(1),
            head_time - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - waited_from));
    }
    first = false;
    if (st->stopping) break;

    std::string request_id = "req-" + random_hex(8);
    buffer.max_size(read_buffer_limit);  // never below its size: no bound set here is above this one
    // The header first: a streamed route takes the body in pieces, any other gets it whole.
    bhttp::request_parser<bhttp::empty_body> head_parser;
    head_parser.body_limit(boost::none);
    // Also keeps every field under Beast's 64 KiB per-field bound, which it enforces by throwing
    // from inside the read (out of io_context::run, the whole daemon with it).
    head_parser.header_limit(max_header_bytes);

    stream.expires_after(head_time);
    if (reading_since == std::chrono::steady_clock::time_point{}) reading_since = std::chrono::steady_clock::now();
    reading = &head_parser;
    auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, head_parser, use_tuple);
    reading = nullptr;
    reading_since = {};
    // A whole header: from now on the connection works for someone (a streamed route decides on
    // the header, and authenticates there).
    if (!hec) book.busy(ticket);
    // From its complete header on, a request is in flight: stop() lets it finish. A WebSocket
    // upgrade is a session with no end of its own (a terminal): stop() ends it like an idle one.
    entry->busy = !hec && !beast::websocket::is_upgrade(head_parser.get());
    if (!hec && st->options.trust_request_id) {
      if (auto given = head_parser.get().find("X-Request-Id"); given != head_parser.get().end() &&
                                                               given->value().size() <= 64 && !given->value().empty())
        request_id = std::string(given->value());
    }
    if (!hec) {
      // The body's bytes that came with the header stay, the rest is read in bounded pieces.
      buffer.max_size(std::max(buffer.size(), max_chunk_framing_bytes));
      std::string path;
      std::map<std::string, std::string> query, params;
      split_target(head_parser.get().target(), path, query);
      const auto& select = st->streams;
      if (auto handler = select ? select(head_parser.get().base(), path, params) : stream_handler{}) {
        bhttp::request_parser<bhttp::buffer_body> body_parser{std::move(head_parser)};
        exchange ex{stream, buffer, body_parser, request_id, path, query, params,
                    client_of(st->options, from, body_parser.get())};
        stream.expires_never();
        bool keep = false;
        try {
          keep = co_await handler(ex);
        } catch (const std::exception& e) {
          keep = false;
        }
        if (!keep) {
          // A handler that answered before the body ended (a refusal, an agent that failed):
          // the client may still be sending, and a close with its bytes unread is a reset that
          // discards the answer before the client reads it.
          linger = !body_parser.is_done();
          break;
        }
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
      if (hec == bhttp::error::header_limit && oversized_field_is(buffer, "authorization")) {
        // An oversized bearer token is an authentication failure like any other bad token.
        // Said like every other refused token; the reason goes to the log.
        res = handle_bad_request("invalid token", request_id, errc::unauthenticated);
        if (st->options.log_warning)
          st->options.log_warning("auth: token refused (" + request_id + "): the Authorization header is over the " +
                                  std::to_string(max_header_bytes / 1024) + " KiB header limit");
        res.set(bhttp::field::www_authenticate, "Bearer");
      } else {
        res = handle_bad_request("malformed HTTP request: " + hec.message(), request_id, errc::invalid_argument);
      }
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
      } else if (bec == bhttp::error::buffer_overflow) {
        res = handle_bad_request("malformed HTTP request: a chunk header or the trailer is over " +
                                     std::to_string(max_chunk_framing_bytes / 1024) + " KiB",
                                 request_id, errc::invalid_argument);
        close_after = true;
        linger = true;
      } else if (bec) {
        break;
      } else {
        context ctx;
        ctx.req = parser.release();
        ctx.request_id = request_id;
        ctx.remote = client_of(st->options, from, ctx.req);
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
  stream.socket().shutdown(asio::socket_base::shutdown_send, ignored);
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
  co_await accept_connections(*acc, st->slots, st->backoff, st->stopping, [&st](typename Protocol::socket socket) {
    if constexpr (std::is_same_v<Protocol, tcp>) {
      // Responses go out as header and body writes (and streams as many small ones): without
      // this, Nagle plus the client's delayed ACK add 40 ms to each.
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
    }
    peer from = peer_of(socket);
    asio::co_spawn(st->ioc, run_session(st, any_stream(std::move(socket)), std::move(from)), asio::detached);
  });
}

asio::awaitable<void> wait_until_idle(std::shared_ptr<server::state> st, std::chrono::milliseconds limit) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto until = std::chrono::steady_clock::now() + limit;
  while (st->slots.open() > 0 && std::chrono::steady_clock::now() < until) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(use_tuple);
  }
}

// After abort(), how long the cut connections get to run their clean-up (a streamed exec
// kills its command when its client goes).
constexpr std::chrono::milliseconds unwind_time{1'000};

}  // namespace

server::server(asio::io_context& ioc, server_options options, handler root)
    : state_(std::make_shared<state>(ioc, std::move(options), std::move(root))) {}

server::~server() { stop(); }

result<asio::ip::tcp::endpoint> parse_listen_address(const std::string& host_port) {
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
  return tcp::endpoint(addr, static_cast<unsigned short>(port));
}

result<tcp::acceptor> listen_on(asio::io_context& io, const std::string& host_port) {
  auto ep = parse_listen_address(host_port);
  if (!ep) return std::move(ep).err();
  beast::error_code ec;
  tcp::acceptor acceptor(io);
  acceptor.open(ep->protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(*ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return make_error(errc::unavailable, "cannot listen on " + host_port + ": " + ec.message());
  return acceptor;
}

result<unsigned short> server::listen_tcp(const std::string& host_port) {
  auto acceptor = listen_on(state_->ioc, host_port);
  if (!acceptor) return std::move(acceptor).err();
  unsigned short bound = acceptor->local_endpoint().port();
  asio::co_spawn(state_->ioc, accept_loop<tcp>(state_, std::move(*acceptor)), asio::detached);
  return bound;
}

void server::set_stream_selector(stream_selector selector) { state_->streams = std::move(selector); }

asio::awaitable<void> server::serve(any_stream connection, peer from) {
  auto st = state_;
  if (st->stopping) co_return;
  auto session = run_session(st, std::move(connection), std::move(from));  // not a temporary: GCC 12
  co_await std::move(session);
}

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
  state_->slots.wake();  // an acceptor paused at the cap
  // Only connections waiting for a request are cancelled; one inside a request (streamed or
  // not) finishes it, and drain()'s deadline is what ends it otherwise.
  for (auto& session : state_->sessions)
    if (!session.busy) session.cut(false);
}

void server::abort() {
  stop();
  for (auto& session : state_->sessions) session.cut(true);
}

std::size_t server::active_connections() const { return state_->slots.open(); }

std::uint64_t server::accept_failures() const { return state_->backoff.failures(); }

asio::awaitable<void> server::drain(std::chrono::milliseconds deadline) {
  auto st = state_;
  co_await wait_until_idle(st, deadline);
  if (st->slots.open() == 0) co_return;
  if (st->options.log_warning)
    st->options.log_warning(st->options.listener_name + ": " + std::to_string(st->slots.open()) +
                            " connections still busy at the shutdown deadline: cutting them");
  for (auto& session : st->sessions) session.cut(true);
  co_await wait_until_idle(st, unwind_time);
}

accept_backoff::accept_backoff(std::string listener, warning_log log, std::chrono::milliseconds pause,
                               std::chrono::milliseconds log_period)
    : listener_(std::move(listener)), log_(std::move(log)), pause_(pause), log_period_(log_period) {}

namespace {

// accept(2): these mean the one connection failed (the client gave up, a protocol error on its
// way in); the next one may be fine, so retry at once.
bool connection_failed_alone(const boost::system::error_code& ec) {
  if (ec == asio::error::connection_aborted) return true;
  if (ec.category() != boost::system::system_category()) return false;
  switch (ec.value()) {
    case EPROTO: case ENOPROTOOPT: case EHOSTDOWN: case ENONET: case EHOSTUNREACH: case EOPNOTSUPP:
    case ENETUNREACH: case ENETDOWN: case EPERM: case EINTR: case EAGAIN:
      return true;
    default:
      return false;
  }
}

}  // namespace

void accept_backoff::warn_limited(const std::string& what) {
  auto now = std::chrono::steady_clock::now();
  if (last_limit_line_ && now - *last_limit_line_ < log_period_) return;
  last_limit_line_ = now;
  if (log_) log_(listener_ + ": " + what);
}

asio::awaitable<void> accept_backoff::after(const boost::system::error_code& ec) {
  ++failures_;
  if (connection_failed_alone(ec)) co_return;
  ++unlogged_;
  auto now = std::chrono::steady_clock::now();
  if (!last_line_ || now - *last_line_ >= log_period_) {
    last_line_ = now;
    if (log_)
      log_(listener_ + ": accept failed (" + ec.message() + "), " + std::to_string(unlogged_) +
           " time(s) since the last report: pausing " + std::to_string(pause_.count()) + " ms between attempts");
    unlogged_ = 0;
  }
  asio::steady_timer timer(co_await asio::this_coro::executor, pause_);
  co_await timer.async_wait(use_tuple);
}

}  // namespace sandfort::http
