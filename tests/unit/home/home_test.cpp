// Links home over real unix sockets, in one process: a sandbox's door, the hello, the pool, and
// the agent's dialer serving calls with the agent's own HTTP server (docs/architecture.md, "The
// agent dials home"). What a sandbox could do wrong on a link is staged here as raw writes.

#include <catch2/catch.hpp>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <filesystem>

#include "home/dial.hpp"
#include "ports/forward.hpp"
#include "sandfort/home/door.hpp"
#include "sandfort/home/hello.hpp"
#include "sandfort/home/pool.hpp"
#include "sandfort/home/port.hpp"
#include "sandfort/http/message.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "support/run_coroutine.hpp"

using namespace sandfort;
using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using local = asio::local::stream_protocol;
using sandfort::use_tuple;
using testing::run_coroutine;

namespace {

struct temp_dir {
  std::string path;
  temp_dir() {
    char pattern[] = "/tmp/sf-home-XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(d);
  co_await t.async_wait(use_tuple);
}

// A raw connection to a door: what a sandbox process (or the agent) does.
asio::awaitable<http::any_stream> dial_raw(const std::string& path) {
  local::socket s(co_await asio::this_coro::executor);
  auto [ec] = co_await s.async_connect(local::endpoint(path), use_tuple);
  REQUIRE_FALSE(ec);
  co_return http::any_stream(std::move(s));
}

asio::awaitable<void> send(http::any_stream& s, std::string bytes) {
  auto [ec, n] = co_await asio::async_write(s, asio::buffer(bytes), use_tuple);
  REQUIRE_FALSE(ec);
}

// Whether the other end closed the stream within the time (it reads and drops what comes).
asio::awaitable<bool> closed_within(http::any_stream& s, std::chrono::milliseconds d) {
  s.expires_after(d);
  char buf[256];
  for (;;) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), use_tuple);
    if (ec) co_return ec != boost::beast::error::timeout;
  }
}

// GET target over a link taken from the pool; the answer's body.
asio::awaitable<std::string> call(http::any_stream link, const std::string& target) {
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, target, 11};
  req.set(bhttp::field::host, "agent");
  auto [wec, wn] = co_await bhttp::async_write(link, req, use_tuple);
  REQUIRE_FALSE(wec);
  boost::beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  link.expires_after(10s);
  auto [rec, rn] = co_await bhttp::async_read(link, buffer, res, use_tuple);
  REQUIRE_FALSE(rec);
  co_return res.body();
}

// The agent's side: an HTTP server answering every call with its target, fed by the dialer.
struct agent_side {
  explicit agent_side(asio::io_context& ioc)
      : server(ioc, http::server_options{}, [](http::context& ctx) -> asio::awaitable<http::response> {
          co_return http::json_response(200, {{"target", ctx.path}});
        }) {}
  http::server server;
};

}  // namespace

TEST_CASE("home: a hello names what the link is for, and nothing else passes", "[home]") {
  CHECK(home::hello_line(home::link_kind::agent) == "SANDFORT-HOME/1 agent\n");
  CHECK(*home::parse_hello("SANDFORT-HOME/1 tunnel") == home::link_kind::tunnel);
  for (const char* bad : {"", "SANDFORT-HOME/1", "SANDFORT-HOME/1 agent ", "SANDFORT-HOME/2 agent",
                          "sandfort-home/1 agent", "SANDFORT-HOME/1 agent\r", "GET / HTTP/1.1"})
    CHECK_FALSE(home::parse_hello(bad).ok());
}

TEST_CASE("home: read_hello takes the line and not one byte more, long, wrong, silent and closed links fail",
          "[home]") {
  asio::io_context ioc;
  auto pair = [&] {
    local::socket a(ioc), b(ioc);
    asio::local::connect_pair(a, b);
    return std::pair{http::any_stream(std::move(a)), http::any_stream(std::move(b))};
  };
  run_coroutine(ioc, [&]() -> asio::awaitable<bool> {
    {  // the hello and what follows it in one write, then the rest in another
      auto [dialer, door] = pair();
      co_await send(dialer, "SANDFORT-HOME/1 tunnel\nCONNECT example.com:443 HTTP/1.1\r\n");
      auto kind = co_await home::read_hello(door);
      REQUIRE(kind.ok());
      CHECK(*kind == home::link_kind::tunnel);
      char buf[64];
      auto [ec, n] = co_await door.async_read_some(asio::buffer(buf), use_tuple);
      CHECK(std::string(buf, n) == "CONNECT example.com:443 HTTP/1.1\r\n");
    }
    {  // a hello in pieces (no structured binding: Clang 14 cannot capture one)
      auto ends = pair();
      auto& dialer = ends.first;
      auto& door = ends.second;
      co_await send(dialer, "SANDFORT-HO");
      asio::co_spawn(co_await asio::this_coro::executor, [&]() -> asio::awaitable<void> {
        co_await sleep_for(50ms);
        co_await send(dialer, "ME/1 agent\n");
      }, asio::detached);
      auto kind = co_await home::read_hello(door);
      REQUIRE(kind.ok());
      CHECK(*kind == home::link_kind::agent);
    }
    {  // 64 bytes and no newline
      auto [dialer, door] = pair();
      co_await send(dialer, std::string(200, 'A'));
      auto kind = co_await home::read_hello(door);
      CHECK(kind.err().code == errc::invalid_argument);
    }
    {  // a wrong line
      auto [dialer, door] = pair();
      co_await send(dialer, "SANDFORT-HOME/1 admin\n");
      auto kind = co_await home::read_hello(door);
      CHECK(kind.err().code == errc::invalid_argument);
    }
    {  // silence
      auto [dialer, door] = pair();
      co_await send(dialer, "SANDFORT");
      auto started = std::chrono::steady_clock::now();
      auto kind = co_await home::read_hello(door, 200ms);
      CHECK(kind.err().code == errc::unavailable);
      CHECK(std::chrono::steady_clock::now() - started < 5s);
    }
    {  // closed halfway
      auto [dialer, door] = pair();
      co_await send(dialer, "SANDFORT-HOME/1 ag");
      dialer.close();
      auto kind = co_await home::read_hello(door);
      CHECK(kind.err().code == errc::unavailable);
    }
    co_return true;
  }());
}

TEST_CASE("home: the agent dials its door, keeps links idle, and each call is served over one", "[home]") {
  temp_dir tmp;
  asio::io_context ioc;
  home::link_pool pool;
  std::vector<std::string> tunnelled;
  home::doors doors(ioc, {tmp.path + "/home"}, pool,
                    [&](const std::string& id, http::any_stream) -> asio::awaitable<void> {
                      tunnelled.push_back(id);
                      co_return;
                    });
  auto dir = doors.open("sbx-0123456789abcdef");
  REQUIRE(dir.ok());
  struct stat st {};
  REQUIRE(::stat(dir->c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  REQUIRE(::stat((*dir + "/home.sock").c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 07777) == 0666);

  agent_side agent(ioc);
  agent::home::dial_options dialing;
  dialing.door = *dir + "/home.sock";
  dialing.egress_listen.clear();
  REQUIRE(agent::home::dial_home(ioc, dialing, agent.server).ok());

  run_coroutine(ioc, [&]() -> asio::awaitable<bool> {
    for (int i = 0; i < 100 && pool.idle("sbx-0123456789abcdef") < 4; ++i) co_await sleep_for(10ms);
    CHECK(pool.idle("sbx-0123456789abcdef") == 4);
    // Ten calls one after another: every one is answered, and the idle links are made up again.
    for (int i = 0; i < 10; ++i) {
      auto link = co_await pool.take("sbx-0123456789abcdef", 2s);
      REQUIRE(link.ok());
      auto body = co_await call(std::move(*link), "/call/" + std::to_string(i));
      CHECK(body == R"({"target":"/call/)" + std::to_string(i) + R"("})");
    }
    // Eight calls at once, twice the idle links: each call that takes a link and speaks on it makes
    // the agent dial another, so the last ones wait for a link instead of failing.
    int answered = 0;
    auto executor = co_await asio::this_coro::executor;
    for (int i = 0; i < 8; ++i)
      asio::co_spawn(executor, [&, i]() -> asio::awaitable<void> {
        auto link = co_await pool.take("sbx-0123456789abcdef", 5s);
        REQUIRE(link.ok());
        auto body = co_await call(std::move(*link), "/at-once/" + std::to_string(i));
        CHECK(body == R"({"target":"/at-once/)" + std::to_string(i) + R"("})");
        ++answered;
      }, asio::detached);
    for (int i = 0; i < 500 && answered < 8; ++i) co_await sleep_for(10ms);
    CHECK(answered == 8);
    for (int i = 0; i < 100 && pool.idle("sbx-0123456789abcdef") < 4; ++i) co_await sleep_for(10ms);
    CHECK(pool.idle("sbx-0123456789abcdef") == 4);
    // Another sandbox's pool has nothing: a link is its door's sandbox's, and only its.
    auto other = co_await pool.take("sbx-ffffffffffffffff", 100ms);
    CHECK(other.err().code == errc::unavailable);
    co_return true;
  }());
  CHECK(tunnelled.empty());

  // Closed: the directory goes, idle links close; a call waits its time for a link and fails.
  doors.close("sbx-0123456789abcdef");
  CHECK_FALSE(std::filesystem::exists(*dir));
  CHECK(pool.idle("sbx-0123456789abcdef") == 0);
  run_coroutine(ioc, [&]() -> asio::awaitable<bool> {
    auto started = std::chrono::steady_clock::now();
    auto link = co_await pool.take("sbx-0123456789abcdef", 300ms);
    CHECK(link.err().message == "the sandbox's agent is not connected");
    CHECK(std::chrono::steady_clock::now() - started >= 250ms);  // nothing came in the meantime
    co_return true;
  }());
}

TEST_CASE("home: a tunnel link reaches the handler with its door's sandbox and the bytes after the hello",
          "[home]") {
  temp_dir tmp;
  asio::io_context ioc;
  home::link_pool pool;
  std::vector<std::pair<std::string, std::string>> tunnels;
  home::doors doors(ioc, {tmp.path}, pool, [&](const std::string& id, http::any_stream link) -> asio::awaitable<void> {
    char buf[128];
    link.expires_after(5s);
    auto [ec, n] = co_await link.async_read_some(asio::buffer(buf), use_tuple);
    tunnels.emplace_back(id, std::string(buf, ec ? 0 : n));
    co_await send(link, "HTTP/1.1 200 Connection established\r\n\r\n");
  });
  auto a = doors.open("sbx-aaaaaaaaaaaaaaaa");
  auto b = doors.open("sbx-bbbbbbbbbbbbbbbb");
  REQUIRE((a.ok() && b.ok()));
  run_coroutine(ioc, [&]() -> asio::awaitable<bool> {
    // What a sandbox says about itself changes nothing: B's socket is B's.
    auto link = co_await dial_raw(*b + "/home.sock");
    co_await send(link, "SANDFORT-HOME/1 tunnel\nCONNECT api.example.com:443 HTTP/1.1\r\nX-Sandbox: sbx-aaaaaaaaaaaaaaaa\r\n\r\n");
    char buf[64];
    link.expires_after(5s);
    auto [ec, n] = co_await link.async_read_some(asio::buffer(buf), use_tuple);
    CHECK(std::string(buf, ec ? 0 : n).starts_with("HTTP/1.1 200"));
    co_return true;
  }());
  REQUIRE(tunnels.size() == 1);
  CHECK(tunnels[0].first == "sbx-bbbbbbbbbbbbbbbb");
  CHECK(tunnels[0].second.starts_with("CONNECT api.example.com:443 HTTP/1.1\r\n"));
}

TEST_CASE("home: links that say no hello, a wrong one, or come too many at once are closed", "[home]") {
  temp_dir tmp;
  asio::io_context ioc;
  home::link_pool pool(2);
  home::door_options options{tmp.path};
  options.max_greeting = 4;
  options.hello_timeout = 300ms;
  home::doors doors(ioc, options, pool, [](const std::string&, http::any_stream) -> asio::awaitable<void> { co_return; });
  auto dir = doors.open("sbx-cccccccccccccccc");
  REQUIRE(dir.ok());
  const std::string door = *dir + "/home.sock";
  run_coroutine(ioc, [&]() -> asio::awaitable<bool> {
    auto wrong = co_await dial_raw(door);
    co_await send(wrong, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    bool closed = co_await closed_within(wrong, 2s);
    CHECK(closed);
    // Four silent links are all the door waits for; a fifth is closed at once, and the four
    // when their time is up.
    std::vector<http::any_stream> silent;
    for (int i = 0; i < 4; ++i) silent.push_back(co_await dial_raw(door));
    co_await sleep_for(50ms);
    CHECK(doors.busy_links("sbx-cccccccccccccccc") == 4);
    auto fifth = co_await dial_raw(door);
    closed = co_await closed_within(fifth, 200ms);
    CHECK(closed);
    for (auto& s : silent) {
      closed = co_await closed_within(s, 2s);
      CHECK(closed);
    }
    CHECK(doors.busy_links("sbx-cccccccccccccccc") == 0);
    // An agent that dials without end holds no more idle links than the pool keeps.
    std::vector<http::any_stream> agents;
    for (int i = 0; i < 6; ++i) {
      agents.push_back(co_await dial_raw(door));
      co_await send(agents.back(), home::hello_line(home::link_kind::agent));
    }
    co_await sleep_for(100ms);
    CHECK(pool.idle("sbx-cccccccccccccccc") == 2);
    int cut = 0;
    for (auto& s : agents) {
      closed = co_await closed_within(s, 100ms);
      cut += closed ? 1 : 0;
    }
    CHECK(cut == 4);
    co_return true;
  }());
}

TEST_CASE("home: the agent's egress listener carries each client over a tunnel link of its own, both ways",
          "[home]") {
  temp_dir tmp;
  asio::io_context ioc;
  home::link_pool pool;
  std::vector<std::string> heads;
  // A stand-in for the proxy: answers the request head it reads, then echoes what follows.
  home::doors doors(ioc, {tmp.path}, pool, [&](const std::string& id, http::any_stream link) -> asio::awaitable<void> {
    char buf[512];
    link.expires_after(5s);
    auto [ec, n] = co_await link.async_read_some(asio::buffer(buf), use_tuple);
    if (ec) co_return;
    heads.push_back(id + " " + std::string(buf, n));
    co_await send(link, "HTTP/1.1 200 Connection established\r\n\r\n");
    for (;;) {
      auto [rec, got] = co_await link.async_read_some(asio::buffer(buf), use_tuple);
      if (rec) co_return;
      co_await send(link, "echo:" + std::string(buf, got));
    }
  });
  auto dir = doors.open("sbx-dddddddddddddddd");
  REQUIRE(dir.ok());
  agent_side agent(ioc);
  agent::home::dial_options dialing;
  dialing.door = *dir + "/home.sock";
  // A free port: bound and released (nothing else on this machine takes it in between).
  asio::ip::tcp::acceptor probe(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  const auto port = probe.local_endpoint().port();
  probe.close();
  dialing.egress_listen = "127.0.0.1:" + std::to_string(port);
  REQUIRE(agent::home::dial_home(ioc, dialing, agent.server).ok());
  run_coroutine(ioc, [&]() -> asio::awaitable<bool> {
    asio::ip::tcp::socket s(co_await asio::this_coro::executor);
    auto [cec] = co_await s.async_connect({asio::ip::make_address("127.0.0.1"), port}, use_tuple);
    REQUIRE_FALSE(cec);
    http::any_stream client(std::move(s));
    co_await send(client, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n");
    char buf[256];
    client.expires_after(5s);
    auto [ec, n] = co_await client.async_read_some(asio::buffer(buf), use_tuple);
    REQUIRE_FALSE(ec);
    CHECK(std::string(buf, n) == "HTTP/1.1 200 Connection established\r\n\r\n");
    co_await send(client, "ping");
    auto [ec2, n2] = co_await client.async_read_some(asio::buffer(buf), use_tuple);
    REQUIRE_FALSE(ec2);
    CHECK(std::string(buf, n2) == "echo:ping");
    co_return true;
  }());
  REQUIRE(heads.size() == 1);
  CHECK(heads[0].starts_with("sbx-dddddddddddddddd CONNECT api.example.com:443 HTTP/1.1\r\n"));
}

TEST_CASE("home: a port's upgrade is read to the end of its header and not one byte further", "[home]") {
  asio::io_context ioc;
  local::socket a(ioc), b(ioc);
  asio::local::connect_pair(a, b);
  http::any_stream daemon_end(std::move(a)), agent_end(std::move(b));
  run_coroutine(ioc, [&]() -> asio::awaitable<bool> {
    auto executor = co_await asio::this_coro::executor;
    std::string request;
    asio::co_spawn(executor, [&]() -> asio::awaitable<void> {
      char buf[512];
      auto [ec, n] = co_await agent_end.async_read_some(asio::buffer(buf), use_tuple);
      request.assign(buf, ec ? 0 : n);
      // The header's end split across two writes, and the application's first bytes right after it.
      co_await send(agent_end, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: sandfort-tcp\r\n\r");
      co_await sleep_for(20ms);
      co_await send(agent_end, "\nbanner from the app\n");
    }, asio::detached);
    auto opened = co_await home::open_port(daemon_end, 8080, 2s);
    REQUIRE(opened.ok());
    CHECK(request == home::port_request(8080));
    CHECK(request.starts_with("GET /tcp/8080 HTTP/1.1\r\n"));
    char buf[64];
    auto [ec, n] = co_await daemon_end.async_read_some(asio::buffer(buf), use_tuple);
    REQUIRE_FALSE(ec);
    CHECK(std::string(buf, n) == "banner from the app\n");
    co_return true;
  }());
  CHECK(home::answer_status("HTTP/1.1 503 Service Unavailable\r\n\r\n") == 503);
  CHECK(home::answer_status("HTTP/1.1 1O1 x\r\n\r\n") == 0);
  CHECK(home::answer_status("SSH-2.0-x\r\n\r\n") == 0);
}

TEST_CASE("home: the agent connects a link to a port on its loopback, nothing listening and its own port are refused",
          "[home]") {
  temp_dir tmp;
  asio::io_context ioc;
  home::link_pool pool;
  home::doors doors(ioc, {tmp.path + "/home"}, pool,
                    [](const std::string&, http::any_stream) -> asio::awaitable<void> { co_return; });
  auto dir = doors.open("sbx-eeeeeeeeeeeeeeee");
  REQUIRE(dir.ok());
  agent_side agent(ioc);
  agent.server.set_stream_selector(http::make_stream_selector(agent::ports::stream_routes()));
  agent::home::dial_options dialing;
  dialing.door = *dir + "/home.sock";
  dialing.egress_listen.clear();
  REQUIRE(agent::home::dial_home(ioc, dialing, agent.server).ok());

  // The application: it speaks first (a banner), then echoes.
  asio::ip::tcp::acceptor app(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  const auto app_port = app.local_endpoint().port();
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
    auto [aec, s] = co_await app.async_accept(use_tuple);
    if (aec) co_return;
    http::any_stream peer(std::move(s));
    co_await send(peer, "hello from the app\n");
    char buf[256];
    for (;;) {
      auto [rec, got] = co_await peer.async_read_some(asio::buffer(buf), use_tuple);
      if (rec) co_return;
      co_await send(peer, "echo:" + std::string(buf, got));
    }
  }, asio::detached);
  asio::ip::tcp::acceptor own(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  agent::ports::keep_private(own.local_endpoint().port());
  asio::ip::tcp::acceptor probe(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  const auto closed_port = probe.local_endpoint().port();
  probe.close();

  run_coroutine(ioc, [&]() -> asio::awaitable<bool> {
    auto link = co_await pool.take("sbx-eeeeeeeeeeeeeeee", 2s);
    REQUIRE(link.ok());
    auto opened = co_await home::open_port(*link, app_port, 2s);
    REQUIRE(opened.ok());
    char buf[256];
    link->expires_after(5s);
    auto [ec, n] = co_await link->async_read_some(asio::buffer(buf), use_tuple);
    REQUIRE_FALSE(ec);
    CHECK(std::string(buf, n) == "hello from the app\n");
    co_await send(*link, "ping");
    auto [ec2, n2] = co_await link->async_read_some(asio::buffer(buf), use_tuple);
    REQUIRE_FALSE(ec2);
    CHECK(std::string(buf, n2) == "echo:ping");

    auto nothing = co_await pool.take("sbx-eeeeeeeeeeeeeeee", 2s);
    REQUIRE(nothing.ok());
    auto refused = co_await home::open_port(*nothing, closed_port, 2s);
    CHECK(refused.err().code == errc::unavailable);
    CHECK(refused.err().message == "nothing is listening on port " + std::to_string(closed_port));

    auto agents_own = co_await pool.take("sbx-eeeeeeeeeeeeeeee", 2s);
    REQUIRE(agents_own.ok());
    auto kept = co_await home::open_port(*agents_own, own.local_endpoint().port(), 2s);
    CHECK(kept.err().code == errc::permission_denied);
    co_return true;
  }());
}
