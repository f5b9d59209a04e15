#include "support/wsclient.hpp"
#include "sandfort/http/use_tuple.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>
#include <tuple>

#include "sandfort/http/any_stream.hpp"

namespace sandfort::wsclient {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bwebsocket = boost::beast::websocket;
using std::chrono::milliseconds;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;
constexpr std::size_t max_body_in_error = 1024;

error unavailable(std::string message) { return make_error(errc::unavailable, std::move(message)); }

// The error class of an HTTP status, the inverse of sandfort::http_status for the API's codes.
errc class_of(unsigned status) {
  switch (status) {
    case 400: return errc::invalid_argument;
    case 401: return errc::unauthenticated;
    case 403: return errc::permission_denied;
    case 404: return errc::not_found;
    case 409: return errc::conflict;
    case 413: return errc::payload_too_large;
    case 429: return errc::rate_limited;
    case 503: return errc::unavailable;
    default: break;
  }
  if (status >= 500) return errc::internal;
  if (status >= 400) return errc::invalid_argument;
  return errc::unavailable;  // 1xx/2xx/3xx other than 101: not a WebSocket server
}

error refused(const bwebsocket::response_type& res) {
  std::string body = res.body().substr(0, max_body_in_error);
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  std::string message = "the server refused the WebSocket upgrade: HTTP " + std::to_string(res.result_int());
  if (!body.empty()) message += ": " + body;
  return make_error(class_of(res.result_int()), std::move(message));
}

}  // namespace

struct client::transport {
  virtual ~transport() = default;
  virtual asio::awaitable<result<void>> write(bool text, std::string_view data) = 0;
  virtual asio::awaitable<result<frame>> read(std::optional<milliseconds> deadline) = 0;
  virtual asio::awaitable<result<void>> close(std::uint16_t code) = 0;
  virtual void abort() = 0;

  options opts;
  bwebsocket::response_type response;
};

namespace {

struct stream_transport final : client::transport {
  explicit stream_transport(const asio::any_io_executor& executor, options o) : ws(executor) { opts = std::move(o); }

  http::any_stream& lowest() { return ws.next_layer(); }

  asio::awaitable<result<void>> handshake(const std::string& host, const std::string& target) {
    ws.set_option(bwebsocket::stream_base::decorator([headers = opts.headers](bwebsocket::request_type& req) {
      req.set(beast::http::field::user_agent, "sandfort-wsclient");
      for (const auto& [name, value] : headers) req.set(name, value);
    }));
    ws.read_message_max(opts.max_message_bytes);
    lowest().expires_after(opts.handshake_timeout);
    auto [ec] = co_await ws.async_handshake(response, host, target, use_tuple);
    lowest().expires_never();
    if (ec == bwebsocket::error::upgrade_declined) co_return refused(response);
    if (ec == beast::error::timeout)
      co_return unavailable("no WebSocket upgrade within " + std::to_string(opts.handshake_timeout.count()) + " ms");
    if (ec) co_return unavailable("the WebSocket upgrade failed: " + ec.message());
    co_return ok_t{};
  }

  asio::awaitable<result<void>> write(bool text, std::string_view data) override {
    ws.text(text);
    asio::const_buffer bytes(data.data(), data.size());
    auto [ec, n] = co_await ws.async_write(bytes, use_tuple);
    if (ec) co_return unavailable("sending failed: " + ec.message());
    co_return ok_t{};
  }

  asio::awaitable<result<frame>> read(std::optional<milliseconds> deadline) override {
    beast::flat_buffer buffer;
    if (deadline) lowest().expires_after(*deadline);
    auto [ec, n] = co_await ws.async_read(buffer, use_tuple);
    if (deadline) lowest().expires_never();
    if (ec == bwebsocket::error::closed) {
      frame f;
      f.is_close = true;
      f.close_code = static_cast<std::uint16_t>(ws.reason().code);
      f.data.assign(ws.reason().reason.data(), ws.reason().reason.size());
      co_return f;
    }
    if (ec == beast::error::timeout) co_return unavailable("no message within " + std::to_string(deadline->count()) + " ms");
    if (ec) co_return unavailable("reading failed: " + ec.message());
    frame f;
    f.is_text = ws.got_text();
    f.data = beast::buffers_to_string(buffer.data());
    co_return f;
  }

  asio::awaitable<result<void>> close(std::uint16_t code) override {
    if (!ws.is_open()) co_return ok_t{};  // the server closed first; Beast has answered it
    bwebsocket::close_reason reason(code);
    lowest().expires_after(opts.handshake_timeout);
    auto [ec] = co_await ws.async_close(reason, use_tuple);
    if (ec) co_return unavailable("closing failed: " + ec.message());
    co_return ok_t{};
  }

  void abort() override { lowest().close(); }

  bwebsocket::stream<http::any_stream> ws;
};

}  // namespace

client::client(std::unique_ptr<transport> t) : t_(std::move(t)) {}
client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;
client::~client() = default;

asio::awaitable<result<client>> client::connect(std::string host, std::uint16_t port, std::string target,
                                                options opts) {
  using namespace asio::experimental::awaitable_operators;
  auto executor = co_await asio::this_coro::executor;
  tcp::resolver resolver(executor);
  asio::steady_timer timer(executor, opts.connect_timeout);
  std::string service = std::to_string(port);
  auto resolved = co_await (resolver.async_resolve(host, service, use_tuple) || timer.async_wait(use_tuple));
  if (resolved.index() == 1) co_return unavailable("resolving " + host + " timed out");
  auto [rec, endpoints] = std::get<0>(resolved);
  if (rec) co_return unavailable("cannot resolve " + host + ": " + rec.message());

  auto t = std::make_unique<stream_transport>(executor, std::move(opts));
  t->lowest().expires_after(t->opts.connect_timeout);  // for all the addresses together
  auto cec = co_await http::connect_first(t->lowest(), endpoints);
  if (cec) co_return unavailable("cannot connect to " + host + ":" + service + ": " + cec.message());
  std::string host_header = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + service;
  auto shaken = co_await t->handshake(host_header, target);
  if (!shaken) co_return std::move(shaken).err();
  co_return client(std::move(t));
}

asio::awaitable<result<client>> client::connect_unix(std::string socket_path, std::string target, options opts) {
  auto executor = co_await asio::this_coro::executor;
  auto t = std::make_unique<stream_transport>(executor, std::move(opts));
  t->lowest().expires_after(t->opts.connect_timeout);
  local::endpoint endpoint(socket_path);
  auto [cec] = co_await t->lowest().async_connect(endpoint, use_tuple);
  if (cec) co_return unavailable("cannot connect to " + socket_path + ": " + cec.message());
  std::string host_header = "localhost";
  auto shaken = co_await t->handshake(host_header, target);
  if (!shaken) co_return std::move(shaken).err();
  co_return client(std::move(t));
}

asio::awaitable<result<void>> client::send_binary(std::string_view bytes) { return t_->write(false, bytes); }

asio::awaitable<result<void>> client::send_text(std::string_view text) { return t_->write(true, text); }

asio::awaitable<result<frame>> client::read(std::optional<milliseconds> deadline) { return t_->read(deadline); }

asio::awaitable<result<void>> client::close(std::uint16_t code) { return t_->close(code); }

void client::abort() { t_->abort(); }

std::optional<std::string> client::response_header(std::string_view name) const {
  auto it = t_->response.find(name);
  if (it == t_->response.end()) return std::nullopt;
  return std::string(it->value());
}

}  // namespace sandfort::wsclient
