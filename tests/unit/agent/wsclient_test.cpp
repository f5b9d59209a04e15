// The WebSocket client over TCP, against a small Beast server on 127.0.0.1 that runs in a
// thread of its own. (Over unix sockets it is exercised by agent_pty_test.cpp.)

#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <atomic>
#include <list>
#include <mutex>
#include <thread>

#include "support/wsclient.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "support/run_coroutine.hpp"

using namespace sandfort;
using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;
using sandfort::testing::run_coroutine;

namespace {


enum class behaviour { echo, refuse, silent };

class test_server {
 public:
  explicit test_server(behaviour b) : behaviour_(b) {
    asio::co_spawn(ioc_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~test_server() {
    ioc_.stop();
    thread_.join();
  }
  test_server(const test_server&) = delete;
  test_server& operator=(const test_server&) = delete;

  std::uint16_t port() const { return port_; }
  std::string authorization() {
    std::lock_guard lock(mutex_);
    return authorization_;
  }
  std::uint16_t close_code_seen() const { return close_code_seen_; }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
      if (ec) co_return;
      if (behaviour_ == behaviour::silent) {
        silent_.push_back(std::move(socket));  // accepted, never answered
        continue;
      }
      asio::co_spawn(ioc_, serve(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> serve(tcp::socket socket) {
    beast::flat_buffer buffer;
    bhttp::request<bhttp::string_body> req;
    auto [rec, rn] = co_await bhttp::async_read(socket, buffer, req, use_tuple);
    if (rec) co_return;
    {
      std::lock_guard lock(mutex_);
      authorization_ = std::string(req[bhttp::field::authorization]);
    }
    if (behaviour_ == behaviour::refuse) {
      bhttp::response<bhttp::string_body> res{bhttp::status::unauthorized, 11};
      res.set(bhttp::field::content_type, "application/json");
      res.body() = R"({"error":{"code":"unauthenticated","message":"no key"}})";
      res.prepare_payload();
      co_await bhttp::async_write(socket, res, use_tuple);
      co_return;
    }
    beast::websocket::stream<tcp::socket> ws(std::move(socket));
    auto [aec] = co_await ws.async_accept(req, use_tuple);
    if (aec) co_return;
    for (;;) {
      beast::flat_buffer message;
      auto [ec, n] = co_await ws.async_read(message, use_tuple);
      if (ec) {
        close_code_seen_ = static_cast<std::uint16_t>(ws.reason().code);
        co_return;
      }
      if (ws.got_text() && beast::buffers_to_string(message.data()) == "close-me") {
        beast::websocket::close_reason reason(static_cast<beast::websocket::close_code>(4000), "bye");
        co_await ws.async_close(reason, use_tuple);
        co_return;
      }
      ws.text(ws.got_text());
      auto echo = message.data();
      co_await ws.async_write(echo, use_tuple);
    }
  }

  behaviour behaviour_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_{ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::uint16_t port_ = acceptor_.local_endpoint().port();
  std::list<tcp::socket> silent_;
  std::mutex mutex_;
  std::string authorization_;
  std::atomic<std::uint16_t> close_code_seen_{0};
  std::thread thread_;
};

asio::awaitable<bool> echo_session(std::uint16_t port) {
  wsclient::options opts;
  opts.headers.emplace_back("Authorization", "Bearer sfk_test");
  std::string host = "127.0.0.1", target = "/echo?x=1";
  auto c = co_await wsclient::client::connect(host, port, target, std::move(opts));
  REQUIRE(c.ok());

  std::string hello = "hello";
  auto done1 = co_await c->send_text(hello);
  CHECK(done1.ok());
  std::optional<milliseconds> deadline = 5s;
  auto text = co_await c->read(deadline);
  REQUIRE(text.ok());
  CHECK(text->is_text);
  CHECK_FALSE(text->is_close);
  CHECK(text->data == "hello");

  std::string bytes("\x00\xff\x1b[", 4);
  auto done2 = co_await c->send_binary(bytes);
  CHECK(done2.ok());
  auto binary = co_await c->read(deadline);
  REQUIRE(binary.ok());
  CHECK_FALSE(binary->is_text);
  CHECK(binary->data == bytes);

  auto done3 = co_await c->close(1000);
  CHECK(done3.ok());
  co_return true;
}

asio::awaitable<bool> server_closes(std::uint16_t port) {
  wsclient::options opts;
  std::string host = "localhost", target = "/";
  auto c = co_await wsclient::client::connect(host, port, target, std::move(opts));
  REQUIRE(c.ok());
  std::string please = "close-me";
  auto done4 = co_await c->send_text(please);
  CHECK(done4.ok());
  std::optional<milliseconds> deadline = 5s;
  auto closing = co_await c->read(deadline);
  REQUIRE(closing.ok());
  CHECK(closing->is_close);
  CHECK(closing->close_code == 4000);
  CHECK(closing->data == "bye");
  auto after = co_await c->read(deadline);
  CHECK_FALSE(after.ok());
  auto done5 = co_await c->close(1000);
  CHECK(done5.ok());  // nothing left to close
  co_return true;
}

asio::awaitable<result<wsclient::client>> try_connect(std::uint16_t port, milliseconds handshake_timeout) {
  wsclient::options opts;
  opts.handshake_timeout = handshake_timeout;
  std::string host = "127.0.0.1", target = "/";
  co_return co_await wsclient::client::connect(host, port, target, std::move(opts));
}

asio::awaitable<result<wsclient::frame>> read_with_nothing_sent(std::uint16_t port) {
  auto c = co_await try_connect(port, 5s);
  if (!c) co_return c.err();
  std::optional<milliseconds> deadline = 100ms;
  co_return co_await c->read(deadline);
}

}  // namespace

TEST_CASE("the WebSocket client talks to a server over TCP") {
  test_server server(behaviour::echo);

  SECTION("text and binary messages, extra headers, a clean close") {
    CHECK(run_coroutine(echo_session(server.port()), 30s));
    CHECK(server.authorization() == "Bearer sfk_test");
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (server.close_code_seen() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    CHECK(server.close_code_seen() == 1000);
  }
  SECTION("the server's close frame comes back as a frame") {
    CHECK(run_coroutine(server_closes(server.port()), 30s));
  }
  SECTION("a read deadline") {
    auto read = run_coroutine(read_with_nothing_sent(server.port()), 30s);
    REQUIRE_FALSE(read.ok());
    CHECK(read.err().code == errc::unavailable);
    CHECK(read.err().message.find("no message within 100 ms") != std::string::npos);
  }
}

TEST_CASE("the WebSocket client reports refusals and silence as errors") {
  SECTION("an HTTP refusal keeps its status class and body") {
    test_server server(behaviour::refuse);
    auto c = run_coroutine(try_connect(server.port(), 5s), 30s);
    REQUIRE_FALSE(c.ok());
    CHECK(c.err().code == errc::unauthenticated);
    CHECK(c.err().message.find("HTTP 401") != std::string::npos);
    CHECK(c.err().message.find("no key") != std::string::npos);
  }
  SECTION("a server that never answers the upgrade") {
    test_server server(behaviour::silent);
    auto started = std::chrono::steady_clock::now();
    auto c = run_coroutine(try_connect(server.port(), 200ms), 30s);
    REQUIRE_FALSE(c.ok());
    CHECK(c.err().code == errc::unavailable);
    CHECK(c.err().message.find("no WebSocket upgrade within 200 ms") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - started < 5s);
  }
  SECTION("nothing listening") {
    std::uint16_t port = 0;
    {
      asio::io_context ioc;
      tcp::acceptor probe(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      port = probe.local_endpoint().port();
    }
    auto c = run_coroutine(try_connect(port, 5s), 30s);
    REQUIRE_FALSE(c.ok());
    CHECK(c.err().code == errc::unavailable);
    CHECK(c.err().message.find("cannot connect") != std::string::npos);
  }
}
