// WebSockets through the preview: the upgrade is relayed and spliced, a refused one is a plain
// answer, and disconnect() / stop() end open relays at once.

#include <catch2/catch.hpp>

#include <boost/asio/this_coro.hpp>

#include "sandfort/preview/address.hpp"
#include "support/wsclient.hpp"
#include "support.hpp"
#include "support/run_coroutine.hpp"

using namespace sandfort;
using namespace sandfort::preview;
using namespace sandfort::preview::test;
using namespace std::chrono_literals;

namespace {

asio::awaitable<result<wsclient::client>> open_ws(const environment& env, const std::string& sandbox_id,
                                                   std::vector<std::pair<std::string, std::string>> headers,
                                                   std::string target = "/ws") {
  wsclient::options opts;
  opts.headers.emplace_back("Host", env.app_host(sandbox_id));
  for (auto& header : headers) opts.headers.push_back(std::move(header));
  std::string host = "127.0.0.1";
  co_return co_await wsclient::client::connect(host, env.preview_port(), target, std::move(opts));
}

asio::awaitable<result<wsclient::client>> open_echo(const environment& env, const std::string& sandbox_id,
                                                     bool with_token = true) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (with_token) headers.emplace_back("X-Sandfort-Preview-Token", token_for(env, sandbox_id));
  co_return co_await open_ws(env, sandbox_id, std::move(headers));
}

// The text echoed back, or what went wrong.
asio::awaitable<std::string> round_trip(wsclient::client& c, const std::string& text) {
  auto sent = co_await c.send_text(text);
  if (!sent) co_return "send failed: " + sent.err().message;
  auto got = co_await c.read(10s);
  if (!got) co_return "read failed: " + got.err().message;
  co_return got->data;
}

// Bounded wait for something the server thread does after the client has seen its effect.
template <typename Pred>
bool eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

struct ended_relay {
  std::string echo_before;
  std::size_t relays_before = 0;
  std::string read_after;  // the error of the first read after the relay was closed
  std::string other_echo_after;
};

}  // namespace

TEST_CASE("preview: a WebSocket through the preview echoes a frame", "[preview][websocket]") {
  environment env;
  env.directory().put(started(sandbox_a));
  auto echoed = testing::run_coroutine([&]() -> asio::awaitable<std::string> {
    auto c = co_await open_echo(env, sandbox_a);
    if (!c) co_return "connect failed: " + c.err().message;
    std::string text = "ping through the preview";
    std::string back = co_await round_trip(*c, text);
    auto closed = co_await c->close(1000);
    if (!closed) co_return "close failed: " + closed.err().message;
    co_return back;
  }());
  CHECK(echoed == "ping through the preview");
  CHECK(eventually([&] { return env.on_server_thread([&] { return env.preview().open_relays(); }) == 0; }));
}

TEST_CASE("preview: a WebSocket upgrade without the token is refused with 401", "[preview][websocket]") {
  environment env;
  env.directory().put(started(sandbox_a));
  auto refused = testing::run_coroutine([&]() -> asio::awaitable<std::optional<error>> {
    auto c = co_await open_echo(env, sandbox_a, false);
    if (c) co_return std::nullopt;
    co_return c.err();
  }());
  REQUIRE(refused);
  CHECK(refused->code == errc::unauthenticated);
}

TEST_CASE("preview: a WebSocket may carry the token in its query, which the app does not see",
          "[preview][websocket]") {
  environment env;
  env.directory().put(started(sandbox_a));
  auto echoed = testing::run_coroutine([&]() -> asio::awaitable<std::string> {
    std::vector<std::pair<std::string, std::string>> no_headers;
    std::string target = "/ws?sandfort_token=" + token_for(env, sandbox_a);
    auto c = co_await open_ws(env, sandbox_a, std::move(no_headers), std::move(target));
    if (!c) co_return "connect failed: " + c.err().message;
    std::string ask = "?target";
    co_return co_await round_trip(*c, ask);
  }());
  CHECK(echoed == "/ws");
}

// Every preview host is same-site: the cookie alone must not let another sandbox's page in.
TEST_CASE("preview: a WebSocket opened with the cookie must come from a page of the same sandbox",
          "[preview][websocket]") {
  environment env;
  env.directory().put(started(sandbox_a));
  std::string cookie = "sandfort_preview_token=" + token_for(env, sandbox_a);
  std::string same_sandbox = "http://3000-" + sandbox_a + ".preview.localhost:" + std::to_string(env.preview_port());
  std::string other_sandbox = "http://3000-" + sandbox_b + ".preview.localhost:" + std::to_string(env.preview_port());

  auto attempt = [&](std::vector<std::pair<std::string, std::string>> headers) {
    return testing::run_coroutine([&]() -> asio::awaitable<std::string> {
      auto c = co_await open_ws(env, sandbox_a, std::move(headers));
      if (!c) co_return std::string(to_string(c.err().code));
      std::string text = "ok";
      co_return co_await round_trip(*c, text);
    }());
  };
  CHECK(attempt({{"Cookie", cookie}}) == "ok");
  CHECK(attempt({{"Cookie", cookie}, {"Origin", same_sandbox}}) == "ok");
  CHECK(attempt({{"Cookie", cookie}, {"Origin", other_sandbox}}) == "permission_denied");
  CHECK(attempt({{"Cookie", cookie}, {"Origin", "http://evil.test"}}) == "permission_denied");
  CHECK(attempt({{"Cookie", cookie}, {"Origin", "null"}}) == "permission_denied");
  // The header token is not something another page can make a browser send.
  CHECK(attempt({{"X-Sandfort-Preview-Token", token_for(env, sandbox_a)}, {"Origin", other_sandbox}}) == "ok");
}

TEST_CASE("preview: disconnect closes the open WebSocket relays of that sandbox, and only those",
          "[preview][websocket]") {
  environment env;
  env.directory().put(started(sandbox_a));
  env.directory().put(started(sandbox_b));
  auto outcome = testing::run_coroutine([&]() -> asio::awaitable<ended_relay> {
    ended_relay out;
    auto a = co_await open_echo(env, sandbox_a);
    auto b = co_await open_echo(env, sandbox_b);
    if (!a || !b) co_return out;
    std::string hello = "hello";
    out.echo_before = co_await round_trip(*a, hello);
    std::string b_before = co_await round_trip(*b, hello);
    out.relays_before = env.on_server_thread([&] { return env.preview().open_relays(); });

    env.on_server_thread([&] { env.preview().disconnect(sandbox_a); });
    auto after = co_await a->read(10s);
    out.read_after = after ? "a message: " + after->data : after.err().message;
    std::string again = "still here";
    out.other_echo_after = co_await round_trip(*b, again);
    co_return out;
  }());
  CHECK(outcome.echo_before == "hello");
  CHECK(outcome.relays_before == 2);
  // Closed by the preview with a clean end of stream, not a reset or a deadline passing.
  CHECK(outcome.read_after == "reading failed: End of file");
  CHECK(outcome.other_echo_after == "still here");
  CHECK(eventually([&] { return env.on_server_thread([&] { return env.preview().open_relays(); }) <= 1; }));
}

TEST_CASE("preview: stop closes open WebSocket relays", "[preview][websocket]") {
  environment env;
  env.directory().put(started(sandbox_a));
  auto read_after = testing::run_coroutine([&]() -> asio::awaitable<std::string> {
    auto a = co_await open_echo(env, sandbox_a);
    if (!a) co_return "connect failed: " + a.err().message;
    std::string hello = "hello";
    std::string echoed = co_await round_trip(*a, hello);
    if (echoed != hello) co_return "no echo: " + echoed;
    env.on_server_thread([&] { env.preview().stop(); });
    auto after = co_await a->read(10s);
    co_return after ? "a message: " + after->data : after.err().message;
  }());
  CHECK(read_after == "reading failed: End of file");
}
