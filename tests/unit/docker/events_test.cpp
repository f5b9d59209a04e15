// Docker's event stream without Docker: the parser on lines recorded from Docker 20.10 (API
// 1.41), the line splitter's limit, the filters, and unix_engine::follow_events against a
// scripted engine that sends its chunked body in awkward pieces.

#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <sstream>

#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/events.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "support.hpp"
#include "unix_engine.hpp"

using namespace sandfort;
using namespace sandfort::docker;
namespace asio = boost::asio;
using unix_socket = asio::local::stream_protocol;
using namespace std::chrono_literals;

namespace {


// Recorded from Docker 20.10.24 (API 1.41): `docker kill -s KILL`, `docker network disconnect`,
// an OOM kill, `docker rm -f`.
const std::string die_line =
    R"({"status":"die","id":"e2982144b8fff75e6f193dcd52d373e94631f3e0a3e3ebbe3c16e23d84ed1e8d","from":"sandfort/base:bookworm","Type":"container","Action":"die","Actor":{"ID":"e2982144b8fff75e6f193dcd52d373e94631f3e0a3e3ebbe3c16e23d84ed1e8d","Attributes":{"exitCode":"137","image":"sandfort/base:bookworm","io.sandfort.base-image-version":"2","io.sandfort.instance":"inst1","io.sandfort.sandbox":"sbx-0123456789abcdef","name":"goofy_hawking"}},"scope":"local","time":1796098063,"timeNano":1796098063857184817})";
const std::string disconnect_line =
    R"({"Type":"network","Action":"disconnect","Actor":{"ID":"298e29132e95f2ef55dad531f10e7c81ce9c221041c868520eb41a5b6c74a975","Attributes":{"container":"e2982144b8fff75e6f193dcd52d373e94631f3e0a3e3ebbe3c16e23d84ed1e8d","name":"evtest-net","type":"bridge"}},"scope":"local","time":1796098063,"timeNano":1796098063742629427})";
const std::string oom_line =
    R"({"status":"oom","id":"f3617fa2739dcf7f6c98febccb06dd9be92fbbfe1838bf140261929be3ccbf33","from":"sandfort/base:bookworm","Type":"container","Action":"oom","Actor":{"ID":"f3617fa2739dcf7f6c98febccb06dd9be92fbbfe1838bf140261929be3ccbf33","Attributes":{"image":"sandfort/base:bookworm","io.sandfort.base-image-version":"2","io.sandfort.sandbox":"sbx-00000000000000aa","name":"gracious_newton"}},"scope":"local","time":1796098094,"timeNano":1796098094580895182})";
const std::string destroy_line =
    R"({"status":"destroy","id":"e2982144b8fff75e6f193dcd52d373e94631f3e0a3e3ebbe3c16e23d84ed1e8d","from":"sandfort/base:bookworm","Type":"container","Action":"destroy","Actor":{"ID":"e2982144b8fff75e6f193dcd52d373e94631f3e0a3e3ebbe3c16e23d84ed1e8d","Attributes":{"image":"sandfort/base:bookworm","io.sandfort.base-image-version":"2","io.sandfort.instance":"inst1","io.sandfort.sandbox":"sbx-0123456789abcdef","name":"goofy_hawking"}},"scope":"local","time":1796098065,"timeNano":1796098065025689751})";
// Another daemon's container on the same engine.
const std::string foreign_die_line =
    R"({"status":"die","id":"a7f1","from":"x","Type":"container","Action":"die","Actor":{"ID":"a7f1","Attributes":{"exitCode":"0","io.sandfort.instance":"other","io.sandfort.sandbox":"sbx-0123456789abcdef"}},"scope":"local","time":1796098066,"timeNano":1796098066000000000})";

event_subscription ours() {
  event_subscription sub;
  sub.container_labels = {"io.sandfort.instance=inst1"};
  sub.container_actions = {"die", "oom", "destroy", "stop", "start"};
  sub.networks = {"evtest-net"};
  sub.network_actions = {"disconnect", "connect"};
  return sub;
}

}  // namespace

TEST_CASE("events: recorded Docker 1.41 lines parse into what the follower needs", "[docker][events]") {
  auto die = parse_event(die_line);
  REQUIRE(die.ok());
  CHECK(die->type == "container");
  CHECK(die->action == "die");
  CHECK(die->container_id == "e2982144b8fff75e6f193dcd52d373e94631f3e0a3e3ebbe3c16e23d84ed1e8d");
  CHECK(die->actor_id == die->container_id);
  CHECK(die->attributes.at("io.sandfort.sandbox") == "sbx-0123456789abcdef");
  CHECK(die->exit_code == 137);
  CHECK(die->network.empty());
  CHECK(die->time == 1796098063);
  CHECK(die->time_nano == 1796098063857184817);
  CHECK_FALSE(die->lost);

  auto net = parse_event(disconnect_line);
  REQUIRE(net.ok());
  CHECK(net->type == "network");
  CHECK(net->action == "disconnect");
  CHECK(net->actor_id == "298e29132e95f2ef55dad531f10e7c81ce9c221041c868520eb41a5b6c74a975");
  CHECK(net->container_id == "e2982144b8fff75e6f193dcd52d373e94631f3e0a3e3ebbe3c16e23d84ed1e8d");
  CHECK(net->network == "evtest-net");
  CHECK_FALSE(net->exit_code);

  auto oom = parse_event(oom_line);
  REQUIRE(oom.ok());
  CHECK(oom->action == "oom");
  CHECK_FALSE(oom->exit_code);

  // The pre-1.22 shape (status/id only) is still a container event.
  auto old = parse_event(R"({"status":"die","id":"abc","from":"img","time":5})");
  REQUIRE(old.ok());
  CHECK(old->type == "container");
  CHECK(old->action == "die");
  CHECK(old->container_id == "abc");
  CHECK(old->time_nano == 5'000'000'000);
}

TEST_CASE("events: lines that are not events are refused", "[docker][events]") {
  for (std::string bad : {"", "not json", "[]", "{}", R"({"Type":"container"})", "{\"Type\":\"container\",\"Action\":"})
    CHECK_FALSE(parse_event(bad).ok());
  // An exit code that is not a number is left unknown, not guessed.
  auto odd = parse_event(R"({"Type":"container","Action":"die","Actor":{"ID":"x","Attributes":{"exitCode":"13x"}}})");
  REQUIRE(odd.ok());
  CHECK_FALSE(odd->exit_code);
}

TEST_CASE("events: a time past 2262 without timeNano is left unknown, not overflowed", "[docker][events]") {
  // Found by tests/fuzz/fuzz_docker_responses: time * 1e9 overflowed int64 (undefined behaviour).
  auto far = parse_event(R"({"Type":"container","Action":"die","time":9300000000,"Actor":{"ID":"x"}})");
  REQUIRE(far.ok());
  CHECK(far->time == 9300000000);
  CHECK(far->time_nano == 0);
  auto near = parse_event(R"({"Type":"container","Action":"die","time":1700000000,"Actor":{"ID":"x"}})");
  REQUIRE(near.ok());
  CHECK(near->time_nano == 1700000000LL * 1000000000LL);
}

TEST_CASE("events: the subscription's filters, and what is matched on our side", "[docker][events]") {
  auto sub = ours();
  auto filters = event_filters(sub);
  CHECK(filters["type"] == nlohmann::json({"container", "network"}));
  CHECK(filters["event"] == nlohmann::json({"die", "oom", "destroy", "stop", "start", "disconnect", "connect"}));
  // Docker ANDs keys over all types and network events carry no labels: no label key here.
  CHECK_FALSE(filters.contains("label"));
  CHECK_FALSE(filters.contains("network"));

  CHECK(subscription_matches(sub, *parse_event(die_line)));
  CHECK(subscription_matches(sub, *parse_event(disconnect_line)));
  CHECK(subscription_matches(sub, *parse_event(destroy_line)));
  CHECK_FALSE(subscription_matches(sub, *parse_event(foreign_die_line)));
  CHECK_FALSE(subscription_matches(sub, *parse_event(oom_line)));  // no instance label
  auto elsewhere = *parse_event(disconnect_line);
  elsewhere.network = "bridge";
  CHECK_FALSE(subscription_matches(sub, elsewhere));
  auto kill = *parse_event(die_line);
  kill.action = "kill";
  CHECK_FALSE(subscription_matches(sub, kill));
  engine_event lost;
  lost.lost = true;
  CHECK(subscription_matches(sub, lost));

  // Container events only: the label filter goes to Docker.
  event_subscription containers_only;
  containers_only.container_labels = {"io.sandfort.instance=inst1"};
  containers_only.container_actions = {"die"};
  auto f2 = event_filters(containers_only);
  CHECK(f2["type"] == nlohmann::json({"container"}));
  CHECK(f2["label"] == nlohmann::json({"io.sandfort.instance=inst1"}));
}

TEST_CASE("events: since is seconds and nine digits of nanoseconds", "[docker][events]") {
  CHECK(since_parameter(1796098063857184817) == "1796098063.857184817");
  CHECK(since_parameter(1796098063000000042) == "1796098063.000000042");
  CHECK(since_parameter(0) == "0.000000000");
}

TEST_CASE("events: the line splitter joins pieces and drops lines over its limit", "[docker][events]") {
  line_splitter lines(16);
  CHECK(lines.feed("").empty());
  CHECK(lines.feed("{\"a\":").empty());
  auto done = lines.feed("1}\n{\"b\"");
  REQUIRE(done.size() == 1);
  CHECK(done[0].text == "{\"a\":1}");
  CHECK_FALSE(done[0].lost);
  done = lines.feed(":2}\r\n\n");  // CRLF and empty lines are tolerated
  REQUIRE(done.size() == 1);
  CHECK(done[0].text == "{\"b\":2}\r");

  // Exactly the limit passes; one more byte is a lost line, reported once at its newline.
  done = lines.feed(std::string(16, 'x') + "\n");
  REQUIRE(done.size() == 1);
  CHECK(done[0].text.size() == 16);
  CHECK(lines.feed(std::string(10, 'y')).empty());
  CHECK(lines.feed(std::string(10, 'y')).empty());
  CHECK(lines.feed(std::string(1000, 'y')).empty());
  done = lines.feed("yy\nok\n");
  REQUIRE(done.size() == 2);
  CHECK(done[0].lost);
  CHECK(done[0].text.empty());
  CHECK(done[1].text == "ok");
}

namespace {

// A scripted engine on a unix socket: /version answers at once; GET /events gets a chunked 200
// whose body is written piece by piece (each piece one chunk, with a pause between them), and
// ends with the last chunk unless hold_open is set.
class scripted_engine {
 public:
  std::vector<std::string> pieces;
  bool hold_open = false;
  std::string status_line = "HTTP/1.1 200 OK";
  std::vector<std::string> targets;

  scripted_engine()
      : path_("/tmp/sf-events-" + test::unique_token() + ".sock"), acceptor_(ioc_, unix_socket::endpoint(path_)) {
    asio::co_spawn(ioc_, serve(), asio::detached);
  }
  ~scripted_engine() { ::unlink(path_.c_str()); }

  unix_engine make_engine() const {
    return unix_engine(unix_engine_options{.socket_path = path_, .timeout = 5'000ms, .pull_timeout = 5'000ms});
  }
  asio::io_context& ioc() { return ioc_; }

  // Runs work on the io_context that also serves the scripted engine.
  template <typename T>
  T run(asio::awaitable<T> work, asio::cancellation_slot slot = {}) {
    std::optional<T> out;
    asio::co_spawn(ioc_, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(work)); },
                   asio::bind_cancellation_slot(slot, [this](std::exception_ptr e) {
                     acceptor_.close();
                     for (auto* s : open_) s->close();
                     if (e) std::rethrow_exception(e);
                   }));
    ioc_.run_for(20s);
    REQUIRE(out.has_value());
    return std::move(*out);
  }

 private:
  asio::awaitable<void> serve() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
      if (ec) co_return;
      asio::co_spawn(ioc_, answer(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> answer(unix_socket::socket socket) {
    open_.push_back(&socket);
    struct forget {
      std::vector<unix_socket::socket*>& open;
      unix_socket::socket* s;
      ~forget() { std::erase(open, s); }
    } forget_on_exit{open_, &socket};
    std::string head;
    auto [rec, rn] = co_await asio::async_read_until(socket, asio::dynamic_buffer(head), "\r\n\r\n", use_tuple);
    if (rec) co_return;
    std::string target = head.substr(head.find(' ') + 1);
    target = target.substr(0, target.find(' '));
    targets.push_back(target);
    if (target == "/version") {
      std::string body = R"({"Version":"20.10.24+dfsg1","ApiVersion":"1.41","MinAPIVersion":"1.12"})";
      std::string res = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body;
      co_await asio::async_write(socket, asio::buffer(res), use_tuple);
      co_return;
    }
    std::string res = status_line + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    co_await asio::async_write(socket, asio::buffer(res), use_tuple);
    asio::steady_timer pause(ioc_);
    for (const auto& piece : pieces) {
      std::ostringstream chunk;
      chunk << std::hex << piece.size() << "\r\n" << piece << "\r\n";
      auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(chunk.str()), use_tuple);
      if (wec) co_return;
      pause.expires_after(2ms);
      co_await pause.async_wait(use_tuple);
    }
    if (hold_open) {
      // Until the client goes away.
      char c;
      co_await socket.async_read_some(asio::buffer(&c, 1), use_tuple);
      co_return;
    }
    co_await asio::async_write(socket, asio::buffer(std::string("0\r\n\r\n")), use_tuple);
  }

  asio::io_context ioc_;
  std::string path_;
  unix_socket::acceptor acceptor_;
  std::vector<unix_socket::socket*> open_;
};

struct collected {
  std::vector<engine_event> events;
  int opened = 0;
};

asio::awaitable<result<void>> follow(unix_engine& engine, event_subscription sub, collected& into,
                                     std::function<void()> after_each = {}) {
  auto r = co_await engine.follow_events(
      sub,
      [&into, after_each](const engine_event& ev) -> asio::awaitable<void> {
        into.events.push_back(ev);
        if (after_each) after_each();
        co_return;
      },
      [&into] { ++into.opened; });
  co_return r;
}

}  // namespace

TEST_CASE("events: follow_events reads a chunked stream in pieces and reports its end", "[docker][events]") {
  scripted_engine fake;
  // Lines cut in the middle, two in one chunk, one over the limit (70 KiB), another daemon's
  // container (dropped), then the stream ends.
  std::string both = disconnect_line + "\n" + destroy_line + "\n";
  std::string huge = R"({"Type":"container","Action":"die","Actor":{"Attributes":{"x":")" + std::string(70 << 10, 'x') + "\"}}}\n";
  fake.pieces = {die_line.substr(0, 100), die_line.substr(100) + "\n", both, foreign_die_line + "\n",
                 huge.substr(0, 30'000), huge.substr(30'000), oom_line + "\n"};
  auto engine = fake.make_engine();
  auto sub = ours();
  sub.since_nano = 1796098063000000042;
  collected got;
  auto r = fake.run(follow(engine, sub, got));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::unavailable);
  CHECK_THAT(r.err().message, Catch::Contains("ended"));
  CHECK(got.opened == 1);
  REQUIRE(got.events.size() == 4);
  CHECK(got.events[0].action == "die");
  CHECK(got.events[0].exit_code == 137);
  CHECK(got.events[1].action == "disconnect");
  CHECK(got.events[1].network == "evtest-net");
  CHECK(got.events[2].action == "destroy");
  CHECK(got.events[3].lost);  // the 70 KiB line; the oom line has no instance label: dropped
  REQUIRE(fake.targets.size() == 2);
  CHECK(fake.targets[0] == "/version");
  CHECK(fake.targets[1].rfind("/v1.41/events?since=1796098063.000000042&filters=", 0) == 0);
  CHECK(fake.targets[1].find("%22type%22%3A%5B%22container%22%2C%22network%22%5D") != std::string::npos);
}

TEST_CASE("events: an error answer is an error", "[docker][events]") {
  scripted_engine fake;
  fake.status_line = "HTTP/1.1 500 Internal Server Error";
  fake.pieces = {R"({"message":"invalid filter 'evnt'"})"};
  auto engine = fake.make_engine();
  collected got;
  auto r = fake.run(follow(engine, ours(), got));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::internal);
  CHECK_THAT(r.err().message, Catch::Contains("follow Docker's events"));
  CHECK(got.opened == 0);
}

TEST_CASE("events: an engine that is not there is an error at once", "[docker][events]") {
  unix_engine engine(unix_engine_options{.socket_path = "/tmp/sf-no-such-engine.sock", .timeout = 2'000ms});
  collected got;
  auto r = test::run(follow(engine, ours(), got), std::chrono::seconds(10));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::unavailable);
}

TEST_CASE("events: a stream held open ends when the caller cancels", "[docker][events]") {
  scripted_engine fake;
  fake.pieces = {die_line + "\n"};
  fake.hold_open = true;
  auto engine = fake.make_engine();
  asio::cancellation_signal stop;
  collected got;
  // Cancelled from the handler of the first event, as sandfortd's SIGTERM would at any time.
  auto r = fake.run(follow(engine, ours(), got, [&] {
                      asio::post(fake.ioc(), [&] { stop.emit(asio::cancellation_type::terminal); });
                    }),
                    stop.slot());
  REQUIRE_FALSE(r.ok());
  CHECK(got.events.size() == 1);
}
