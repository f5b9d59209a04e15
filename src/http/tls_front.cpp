// The TLS front (tls_front.hpp): handshake, then two byte pumps between the TLS stream and a
// loopback connection to the HTTP server. Each relay owns its certificate context (shared), so a
// reload never touches a running connection.
#include "sandfort/http/tls_front.hpp"
#include "sandfort/http/use_tuple.hpp"

#include "accept_loop.hpp"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <ctime>
#include <fstream>
#include <sstream>

namespace sandfort::http {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t relay_buffer_bytes = 64 * 1024;

// Closes the client's socket when `timer` fires after `limit` (cancel it when the wait is over).
void close_after(asio::steady_timer& timer, std::chrono::milliseconds limit,
                 const std::shared_ptr<ssl::stream<tcp::socket>>& client) {
  timer.expires_after(limit);
  timer.async_wait([client](const boost::system::error_code& e) {
    if (e) return;
    boost::system::error_code ignored;
    client->lowest_layer().close(ignored);
  });
}

// One direction telling the other that it is over.
struct done_signal {
  explicit done_signal(asio::io_context& ioc) : timer(ioc, asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
  bool done = false;
  void set() {
    done = true;
    timer.cancel();
  }
};

std::string read_file(const std::string& path, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read " + path;
    return {};
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string openssl_error(const boost::system::error_code& ec) { return ec.message(); }

}  // namespace

struct tls_front::state {
  asio::io_context& ioc;
  tls_front_options options;
  std::shared_ptr<ssl::context> context;  // the one new connections get
  std::string described;
  std::shared_ptr<tcp::acceptor> acceptor;
  unsigned short upstream_port = 0;
  bool stopping = false;
  accept_backoff backoff;
  refusal_log evictions_log{std::chrono::seconds(5)};
  admitted_connections slots;

  state(asio::io_context& io, tls_front_options o)
      : ioc(io),
        options(std::move(o)),
        backoff(options.listener_name, options.log_warning),
        slots(io, {options.max_connections, options.max_idle_per_source, options.max_idle},
              [this](const std::string& source, connection_book::reason why) { log_eviction(source, why); }) {}

  void log_eviction(const std::string& source, connection_book::reason why) {
    if (!options.log_warning) return;
    const bool own = why == connection_book::reason::source_cap;
    auto count = evictions_log.note(own ? source : std::string("all"), std::chrono::steady_clock::now());
    if (!count) return;
    options.log_warning(options.listener_name + ": closed " + std::to_string(*count) +
                        " connection(s) still in their TLS handshake" + (own ? " from " + source : std::string()) +
                        " to make room for new ones");
  }
};

namespace {

// The two directions of one connection. Bytes from the client go to the server until the client
// is done (its close_notify or EOF half-closes the loopback side, so a request followed by EOF
// still gets its answer); bytes from the server go to the client until the server closes, which
// ends the relay. `finished` is set when this direction has stopped using the TLS stream.
asio::awaitable<void> client_to_server(std::shared_ptr<ssl::stream<tcp::socket>> client,
                                       std::shared_ptr<tcp::socket> upstream,
                                       std::shared_ptr<done_signal> finished) {
  std::array<char, relay_buffer_bytes> buf;
  boost::system::error_code ignored;
  for (;;) {
    auto [ec, n] = co_await client->async_read_some(asio::buffer(buf), use_tuple);
    if (n > 0) {
      auto [wec, wn] = co_await asio::async_write(*upstream, asio::buffer(buf.data(), n), use_tuple);
      if (wec) {
        upstream->close(ignored);  // the server is gone: the other direction ends too
        break;
      }
    }
    if (ec) {
      // The client finished sending (or vanished): the server reads EOF after the last byte.
      upstream->shutdown(tcp::socket::shutdown_send, ignored);
      break;
    }
  }
  finished->set();
}

asio::awaitable<void> relay(std::shared_ptr<tls_front::state> st, tcp::socket accepted) {
  boost::system::error_code ec;
  const auto peer = accepted.remote_endpoint(ec);
  if (ec) co_return;
  const std::string client_address = peer.address().to_string();
  auto context = st->context;  // kept by this relay, whatever a reload does
  auto client = std::make_shared<ssl::stream<tcp::socket>>(std::move(accepted), *context);
  // Idle (closed for room when the front needs it) until its handshake is done.
  std::string source = st->options.idle_source ? st->options.idle_source(client_address) : client_address;
  auto& book = st->slots.book;
  const auto slot = st->slots.opened(
      source.empty() ? source : source_key(source),
      [client] {
        boost::system::error_code ignored;
        client->lowest_layer().close(ignored);
      },
      [client] {
        boost::system::error_code ignored;
        return client->lowest_layer().available(ignored) > 0;
      });
  const auto ticket = slot.ticket();

  // A client that connects and says nothing (or too little) holds a slot: bounded.
  asio::steady_timer deadline(st->ioc);
  close_after(deadline, st->options.handshake_timeout, client);
  auto [hec] = co_await client->async_handshake(ssl::stream_base::server, use_tuple);
  deadline.cancel();
  if (hec) co_return;  // not TLS, an old version, no shared cipher, timed out: nothing to answer
  book.busy(ticket);

  // Bound before it connects, and registered under its port at once: the server may accept it
  // before this coroutine resumes, and must find the client behind it (whose idle connections it
  // counts) from the very first moment.
  auto upstream = std::make_shared<tcp::socket>(st->ioc);
  upstream->open(tcp::v4(), ec);
  if (!ec) upstream->bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0), ec);
  const unsigned short local_port = ec ? 0 : upstream->local_endpoint(ec).port();
  if (ec) {
    if (st->options.log_warning)
      st->options.log_warning(st->options.listener_name + ": cannot open a loopback socket: " + ec.message());
    co_return;
  }
  if (st->options.relay_opened) st->options.relay_opened(local_port, client_address);
  struct unregister {
    tls_front::state& s;
    unsigned short port;
    ~unregister() {
      if (s.options.relay_closed) s.options.relay_closed(port);
    }
  } on_close{*st, local_port};
  auto [cec] = co_await upstream->async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), st->upstream_port),
                                               use_tuple);
  if (cec) {
    if (st->options.log_warning)
      st->options.log_warning(st->options.listener_name + ": cannot reach the API listener: " + cec.message());
    co_return;
  }
  upstream->set_option(tcp::no_delay(true), ec);
  client->lowest_layer().set_option(tcp::no_delay(true), ec);

  auto client_done = std::make_shared<done_signal>(st->ioc);
  asio::co_spawn(st->ioc, client_to_server(client, upstream, client_done), asio::detached);
  std::array<char, relay_buffer_bytes> buf;
  for (;;) {
    auto [rec, n] = co_await upstream->async_read_some(asio::buffer(buf), use_tuple);
    if (n > 0) {
      // A client that stops reading would hold this relay (and the server's side) for ever.
      close_after(deadline, st->options.write_timeout, client);
      auto [wec, wn] = co_await asio::async_write(*client, asio::buffer(buf.data(), n), use_tuple);
      deadline.cancel();
      if (wec) break;
    }
    if (rec) break;
  }
  // The server is done. The TLS stream takes one operation per direction: the client's read is
  // cancelled and ended before close_notify goes out (within a bound: the client may not answer).
  client->lowest_layer().cancel(ec);
  if (!client_done->done) co_await client_done->timer.async_wait(use_tuple);
  close_after(deadline, std::chrono::seconds(2), client);
  co_await client->async_shutdown(use_tuple);
  deadline.cancel();
  client->lowest_layer().close(ec);
  upstream->close(ec);
}

asio::awaitable<void> accept_loop(std::shared_ptr<tls_front::state> st) {
  auto acceptor = st->acceptor;  // kept open by this frame until the loop ends
  co_await accept_connections(*acceptor, st->slots, st->backoff, st->stopping, [&st](tcp::socket socket) {
    asio::co_spawn(st->ioc, relay(st, std::move(socket)), asio::detached);
  });
}

}  // namespace

tls_front::tls_front(asio::io_context& ioc, tls_front_options options)
    : state_(std::make_shared<state>(ioc, std::move(options))) {}

tls_front::~tls_front() { stop(); }

result<void> tls_front::reload() {
  const auto& o = state_->options;
  std::string error;
  const std::string cert = read_file(o.cert_file, error);
  const std::string key = error.empty() ? read_file(o.key_file, error) : std::string{};
  if (!error.empty()) return make_error(errc::invalid_argument, "tls: " + error);

  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  // TLS 1.2 and 1.3 only; OpenSSL's default cipher list for them (no export, NULL or RC4 suites).
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                   ec);
  if (SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION) != 1)
    return make_error(errc::internal, "tls: cannot require TLS 1.2");
  // Renegotiation lets a client make the server redo handshakes at will: off.
  SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (!ec) ctx->use_certificate_chain(asio::buffer(cert), ec);
  if (ec) return make_error(errc::invalid_argument, "tls: " + o.cert_file + ": " + openssl_error(ec));
  ctx->use_private_key(asio::buffer(key), ssl::context::pem, ec);
  if (ec) return make_error(errc::invalid_argument, "tls: " + o.key_file + ": " + openssl_error(ec));
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return make_error(errc::invalid_argument, "tls: " + o.key_file + " is not the key of " + o.cert_file);

  std::string described = o.cert_file;
  if (X509* x = SSL_CTX_get0_certificate(ctx->native_handle())) {
    std::array<char, 256> subject{};
    X509_NAME_oneline(X509_get_subject_name(x), subject.data(), static_cast<int>(subject.size()));
    std::tm expiry{};
    if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &expiry) == 1) {
      std::array<char, 32> when{};
      std::strftime(when.data(), when.size(), "%Y-%m-%dT%H:%M:%SZ", &expiry);
      described = std::string(subject.data()) + ", valid until " + when.data() + " (" + o.cert_file + ")";
    }
  }
  state_->context = std::move(ctx);
  state_->described = std::move(described);
  return ok_t{};
}

result<unsigned short> tls_front::listen(const std::string& host_port, unsigned short upstream_port) {
  if (!state_->context) return make_error(errc::invalid_argument, "tls: no certificate loaded");
  auto opened = listen_on(state_->ioc, host_port);
  if (!opened) return std::move(opened).err();
  auto acceptor = std::make_shared<tcp::acceptor>(std::move(*opened));
  state_->acceptor = acceptor;
  state_->upstream_port = upstream_port;
  asio::co_spawn(state_->ioc, accept_loop(state_), asio::detached);
  return acceptor->local_endpoint().port();
}

void tls_front::stop() {
  state_->stopping = true;
  if (state_->acceptor) {
    boost::system::error_code ignored;
    state_->acceptor->close(ignored);
  }
  state_->slots.wake();
}

std::string tls_front::describe() const { return state_->described; }

}  // namespace sandfort::http
