// http::relay underneath the preview also carries sandfortd → agent traffic (http::forward):
// the same application, reached over a unix socket through an API-like front, keeps the API's
// behaviour — prefix dropped, credentials stripped, one request id, JSON 503 when unreachable.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <optional>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/this_coro.hpp>

#include "sandfort/core/ids.hpp"
#include "sandfort/http/proxy.hpp"
#include "support/wsclient.hpp"
#include "support.hpp"
#include "support/run_coroutine.hpp"

using namespace sandfort;
using namespace sandfort::preview::test;
using namespace std::chrono_literals;
using bhttp::verb;

namespace {

// Upstream connections as sandfortd's agent connector handles them: one kept after an answer
// read to its end (http::relay_result::upstream_reusable) serves the next request. Used on the
// front's I/O thread; `opened` is read by the test.
struct upstreams {
  std::optional<http::any_stream> kept;
  std::atomic<int> opened{0};
};

// "/v1/rest" → "/rest" on the agent's socket; "/missing/…" dials a socket that does not exist.
// Connecting is the caller's part (sandfortd's agent connector): an unreachable agent is its 503.
asio::awaitable<bool> forward_to(std::string socket_path, upstreams& up, http::exchange& ex) {
  std::string path(ex.parser.get().target());
  auto ioc_executor = co_await asio::this_coro::executor;  // GCC 12: no co_await inside ?:
  std::optional<http::any_stream> kept = std::exchange(up.kept, std::nullopt);
  const bool reuse = kept && !path.starts_with("/missing");
  http::any_stream upstream = reuse ? std::move(*kept) : http::any_stream(ioc_executor);
  if (!reuse) {
    std::string dial = path.starts_with("/missing") ? socket_path + ".missing" : socket_path;
    auto [cec] = co_await upstream.async_connect(asio::local::stream_protocol::endpoint(dial), use_tuple);
    if (cec) co_return co_await http::respond_error(ex, make_error(errc::unavailable, "the sandbox agent is not reachable"));
    ++up.opened;
  }
  http::forward_options target;
  target.target = path.starts_with("/v1/") ? path.substr(3) : path;
  // An untrusted upstream must start answering soon.
  target.answer_timeout = std::chrono::milliseconds(300);
  target.idle_timeout = std::chrono::milliseconds(300);
  auto relayed = co_await http::forward(ex, upstream, std::move(target));
  if (relayed.upstream_reusable) {
    upstream.expires_never();
    up.kept.emplace(std::move(upstream));
  }
  co_return relayed.keep_alive;
}

class unix_front {
 public:
  unix_front()
      : socket_path_("/tmp/sfpv-" + random_hex(6) + ".sock"),
        app_(ioc_, {}, &app::unused),
        front_(ioc_, {}, &app::unused) {
    app_.set_stream_selector(app::routes());
    if (!app_.listen_unix(socket_path_)) throw std::runtime_error("cannot listen on " + socket_path_);
    front_.set_stream_selector([path = socket_path_, this](const bhttp::request_header<>&, const std::string&,
                                                     std::map<std::string, std::string>&)
                                   -> http::stream_handler {
      return [path, this](http::exchange& ex) { return forward_to(path, upstreams_, ex); };
    });
    auto port = front_.listen_tcp("127.0.0.1:0");
    if (!port) throw std::runtime_error("cannot listen on 127.0.0.1");
    port_ = *port;
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~unix_front() {
    asio::post(ioc_, [this] {
      front_.stop();
      app_.stop();
    });
    ioc_.stop();
    thread_.join();
    ::unlink(socket_path_.c_str());
  }
  unix_front(const unix_front&) = delete;
  unix_front& operator=(const unix_front&) = delete;

  unsigned short port() const { return port_; }
  int upstreams_opened() const { return upstreams_.opened.load(); }

 private:
  std::string socket_path_;
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(ioc_);
  upstreams upstreams_;  // after ioc_: a kept connection is closed before its io_context goes
  http::server app_;
  http::server front_;
  unsigned short port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST_CASE("forward: the agent gets its own path, no credentials, Host agent and the caller's request id",
          "[preview][relay]") {
  unix_front front;
  auto req = request(verb::post, "/v1/echo?x=1", "127.0.0.1");
  req.set(bhttp::field::authorization, "Bearer sfk_secret");
  req.set(bhttp::field::cookie, "session=s1");
  req.body() = "twelve bytes";
  auto res = fetch(front.port(), std::move(req));
  REQUIRE(res);
  REQUIRE(res->result_int() == 200);
  auto seen = nlohmann::json::parse(res->body());
  CHECK(seen["target"] == "/echo?x=1");
  CHECK(seen["body_size"] == 12);
  CHECK(seen_header(*res, "Authorization").empty());
  CHECK(seen_header(*res, "Cookie").empty());
  CHECK(seen_header(*res, "Host") == "agent");
  std::string id((*res)["X-Request-Id"]);
  CHECK(is_id(id, "req-"));
  CHECK(seen_header(*res, "X-Request-Id") == id);
}

TEST_CASE("forward: an unreachable agent, or one that hangs up, is 503 in the API's error shape",
          "[preview][relay]") {
  unix_front front;
  auto missing = fetch(front.port(), request(verb::get, "/missing/x", "127.0.0.1"));
  REQUIRE(missing);
  CHECK(missing->result_int() == 503);
  auto body = nlohmann::json::parse(missing->body());
  CHECK(body["error"]["code"] == "unavailable");
  CHECK(body["error"]["message"].get<std::string>().find("not reachable") != std::string::npos);

  auto stalled = fetch(front.port(), request(verb::get, "/v1/silent", "127.0.0.1"));
  REQUIRE(stalled);
  CHECK(stalled->result_int() == 503);

  auto hung_up = fetch(front.port(), request(verb::get, "/v1/hang-up", "127.0.0.1"));
  REQUIRE(hung_up);
  CHECK(hung_up->result_int() == 503);
  auto closed = nlohmann::json::parse(hung_up->body());
  CHECK(closed["error"]["message"].get<std::string>().find("closed the connection") != std::string::npos);
}

TEST_CASE("forward: a chunked answer and a WebSocket pass through", "[preview][relay]") {
  unix_front front;
  auto large = fetch(front.port(), request(verb::get, "/v1/large?bytes=300000", "127.0.0.1"));
  REQUIRE(large);
  REQUIRE(large->result_int() == 200);
  REQUIRE(large->body().size() == 300000);
  CHECK(large->body()[299999] == pattern_byte(299999));

  auto echoed = testing::run_coroutine([&]() -> asio::awaitable<std::string> {
    std::string host = "127.0.0.1", target = "/v1/ws";
    wsclient::options opts;
    auto c = co_await wsclient::client::connect(host, front.port(), target, std::move(opts));
    if (!c) co_return "connect failed: " + c.err().message;
    std::string text = "through the agent's socket";
    auto sent = co_await c->send_text(text);
    if (!sent) co_return "send failed: " + sent.err().message;
    auto got = co_await c->read(10s);
    if (!got) co_return "read failed: " + got.err().message;
    co_return got->data;
  }());
  CHECK(echoed == "through the agent's socket");
}

TEST_CASE("forward: an answer read to its end leaves the upstream connection for the next request, "
          "one that closes or hangs up does not",
          "[preview][relay]") {
  unix_front front;
  auto echo = [&](bool close) {
    auto req = request(verb::post, "/v1/echo", "127.0.0.1");
    req.body() = "body";
    if (close) req.keep_alive(false);
    auto res = fetch(front.port(), std::move(req));
    REQUIRE(res);
    REQUIRE(res->result_int() == 200);
  };
  echo(false);
  echo(false);
  auto large = fetch(front.port(), request(verb::get, "/v1/large?bytes=200000", "127.0.0.1"));  // chunked
  REQUIRE(large);
  REQUIRE(large->body().size() == 200000);
  echo(false);
  CHECK(front.upstreams_opened() == 1);

  echo(true);  // the upstream is told to close: not kept
  echo(false);
  CHECK(front.upstreams_opened() == 2);

  auto hung_up = fetch(front.port(), request(verb::get, "/v1/hang-up", "127.0.0.1"));
  REQUIRE(hung_up);
  CHECK(hung_up->result_int() == 503);
  echo(false);
  CHECK(front.upstreams_opened() == 3);
}
