// The egress proxy over real sockets on 127.0.0.1, seen from a raw client: a fake directory, a
// fake resolver and a tiny upstream that counts its connections and records what it received.
//
// Machine rule: the tests only ever connect to 127.0.0.1. Names that resolve elsewhere
// (evil.test) are there to be refused before any dial.

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <condition_variable>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sstream>
#include <thread>

#include "sandfort/crypto/digest.hpp"
#include "sandfort/proxy/proxy.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "support/descriptor_squeeze.hpp"
#include "support/raw_client.hpp"

using namespace sandfort;
using namespace sandfort::proxy;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {


std::string base64(std::string_view in) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < in.size(); i += 3) {
    std::size_t n = std::min<std::size_t>(3, in.size() - i);  // input bytes in this group
    std::uint32_t group = 0;
    for (std::size_t k = 0; k < 3; ++k)
      group = (group << 8) | (k < n ? static_cast<unsigned char>(in[i + k]) : 0u);
    for (std::size_t k = 0; k < 4; ++k) out.push_back(k <= n ? alphabet[(group >> (18 - 6 * k)) & 63] : '=');
  }
  return out;
}

std::string credential(const std::string& id, const std::string& secret) {
  return "Proxy-Authorization: Basic " + base64(id + ":" + secret) + "\r\n";
}

std::string connect_request(const std::string& authority, const std::string& headers) {
  return "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n" + headers + "\r\n";
}

// --- the sandbox side -------------------------------------------------------------------------

class fake_directory final : public egress_directory {
 public:
  void add(const std::string& id, const std::string& org, const std::string& secret,
           std::vector<std::string> allowlist) {
    std::lock_guard lock(mutex_);
    // Started, at the address every test connects from (the credential is bound to it).
    sandboxes_[id] = sandbox_egress{id, org, sha256_hex(secret), std::move(allowlist), "started", "127.0.0.1"};
  }
  // Where the sandbox's container is now, as the sandbox service's row says.
  void place(const std::string& id, const std::string& state, const std::string& address) {
    std::lock_guard lock(mutex_);
    sandboxes_.at(id).state = state;
    sandboxes_.at(id).address = address;
  }
  void remove(const std::string& id) {
    std::lock_guard lock(mutex_);
    sandboxes_.erase(id);
  }
  void set_rules(const std::string& id, std::vector<std::string> deny, std::vector<egress_rule> rules) {
    std::lock_guard lock(mutex_);
    sandboxes_.at(id).deny = std::move(deny);
    sandboxes_.at(id).rules = std::move(rules);
  }
  std::optional<sandbox_egress> find(const std::string& id) override {
    std::lock_guard lock(mutex_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, sandbox_egress> sandboxes_;
};

class fake_resolver final : public name_resolver {
 public:
  fake_resolver() {
    names_["upstream.test"] = {"127.0.0.1"};
    names_["evil.test"] = {"169.254.169.254", "10.0.0.1"};
    names_["localhost"] = {"127.0.0.1", "::1"};
    names_["mixed.test"] = {"10.0.0.1", "169.254.169.254", "127.0.0.1"};
  }
  asio::awaitable<result<std::vector<asio::ip::address>>> resolve(const std::string& host) override {
    ++calls;
    if (host == "hang.test") {
      // Never answers; a cancelled wait is how the proxy gives up on it.
      asio::steady_timer forever(co_await asio::this_coro::executor, std::chrono::hours(24));
      co_await forever.async_wait(use_tuple);
      co_return make_error(errc::unavailable, "hang.test gave up");
    }
    auto it = names_.find(host);
    if (it == names_.end()) co_return make_error(errc::unavailable, "no such host: " + host);
    std::vector<asio::ip::address> out;
    for (const auto& text : it->second) out.push_back(asio::ip::make_address(text));
    co_return out;
  }
  std::atomic<int> calls{0};

 private:
  std::map<std::string, std::vector<std::string>> names_;
};

// --- the upstream -----------------------------------------------------------------------------

// Echoes whatever it receives, except a request starting with "GET "/"POST ", which it answers
// with a small HTTP response and then closes. Runs on the proxy's io_context.
class upstream_server {
 public:
  explicit upstream_server(asio::io_context& ioc)
      : acceptor_(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    asio::co_spawn(ioc, accept_loop(), asio::detached);
  }
  unsigned short port() const { return port_; }
  int accepted() const { return accepted_; }
  std::vector<std::string> received() {
    std::lock_guard lock(mutex_);
    return received_;
  }
  void stop() {  // on the io thread
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    for (auto* s : sockets_) s->close(ignored);
  }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
      if (ec) co_return;
      ++accepted_;
      std::size_t index;
      {
        std::lock_guard lock(mutex_);
        index = received_.size();
        received_.emplace_back();
      }
      asio::co_spawn(acceptor_.get_executor(), serve(std::move(socket), index), asio::detached);
    }
  }

  void record(std::size_t index, std::string_view bytes) {
    std::lock_guard lock(mutex_);
    received_[index].append(bytes);
  }

  asio::awaitable<void> serve(tcp::socket socket, std::size_t index) {
    auto it = sockets_.insert(sockets_.end(), &socket);
    std::string seen;
    bool answered = false;
    char buf[4096];
    for (;;) {
      auto [ec, n] = co_await socket.async_read_some(asio::buffer(buf), use_tuple);
      if (ec) break;
      record(index, std::string_view(buf, n));
      seen.append(buf, n);
      bool http = seen.starts_with("GET ") || seen.starts_with("POST ");
      if (!http) {
        auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(buf, n), use_tuple);
        if (wec) break;
      } else if (!answered && seen.find("\r\n\r\n") != std::string::npos) {
        // Answer, then keep reading (and recording) until the proxy closes: a close with
        // unread bytes would be a reset.
        std::string answer = "HTTP/1.1 203 Non-Authoritative Information\r\nContent-Length: 2\r\n"
                             "Connection: close\r\n\r\nok";
        co_await asio::async_write(socket, asio::buffer(answer), use_tuple);
        boost::system::error_code ignored;
        socket.shutdown(tcp::socket::shutdown_send, ignored);
        answered = true;
      }
    }
    boost::system::error_code ignored;
    socket.close(ignored);
    sockets_.erase(it);
  }

  tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::vector<std::string> received_;
  std::list<tcp::socket*> sockets_;
};

// --- the client -------------------------------------------------------------------------------

using sandfort::testing::raw_client;
using sandfort::testing::raw_response;

// --- the harness ------------------------------------------------------------------------------

proxy_options test_options() {
  proxy_options o;
  o.allowed_ranges = {*parse_cidr("127.0.0.0/8")};
  o.connect_timeout = 5s;
  o.header_timeout = 5s;
  o.idle_timeout = 60s;
  o.max_tunnels_per_sandbox = 64;
  return o;
}

// A proxy and an upstream on one io_context on a background thread. Sandbox "sbx-a" (org-a) may
// reach upstream.test, evil.test, localhost and mixed.test; "sbx-b" (org-b) only upstream.test.
class harness {
 public:
  explicit harness(proxy_options options = test_options(), bool system_names = false)
      : upstream_(ioc_), proxy_(ioc_, std::move(options), directory, names(system_names)) {
    directory.add("sbx-a", "org-a", "secret-a",
                  {"upstream.test", "evil.test", "localhost", "mixed.test", "hang.test", "nowhere.test", "*.ip.test"});
    directory.add("sbx-b", "org-b", "secret-b", {"upstream.test"});
    proxy_.on_decision([this](const egress_event& ev) {
      std::lock_guard lock(mutex_);
      events_.push_back(ev);
      changed_.notify_all();
    });
    auto port = proxy_.listen("127.0.0.1:0");
    if (!port) throw std::runtime_error("listen failed: " + port.err().message);
    port_ = *port;
    ran_out_ = ran_out_signal_.get_future();
    thread_ = std::thread([this] {
      ioc_.run();
      ran_out_signal_.set_value();
    });
  }
  ~harness() { shutdown(); }
  harness(const harness&) = delete;
  harness& operator=(const harness&) = delete;

  // getaddrinfo itself, for the tests of IP literal spellings; the fake map otherwise.
  name_resolver& names(bool system_names) {
    if (system_names) return system_;
    return resolver;
  }

  unsigned short port() const { return port_; }
  unsigned short upstream_port() const { return upstream_.port(); }
  upstream_server& upstream() { return upstream_; }
  egress_proxy& proxy() { return proxy_; }

  template <typename F>
  auto on_proxy_thread(F fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto done = task.get_future();
    asio::post(ioc_, [&task] { task(); });
    if (done.wait_for(10s) != std::future_status::ready) throw std::runtime_error("the proxy thread is stuck");
    return done.get();
  }

  // The n-th decision (0-based), waiting for it if need be.
  egress_event event(std::size_t n) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, 10s, [&] { return events_.size() > n; }))
      throw std::runtime_error("decision " + std::to_string(n) + " was not reported");
    return events_[n];
  }
  // The first decision that satisfies `match`, waiting for it if need be.
  egress_event event_where(const std::function<bool(const egress_event&)>& match) {
    std::unique_lock lock(mutex_);
    auto found = [&] { return std::any_of(events_.begin(), events_.end(), match); };
    if (!changed_.wait_for(lock, 10s, found)) throw std::runtime_error("no such decision was reported");
    return *std::find_if(events_.begin(), events_.end(), match);
  }
  std::size_t event_count() {
    std::lock_guard lock(mutex_);
    return events_.size();
  }

  // Stops the proxy and the upstream, then lets the io_context run out of work by itself: true
  // when it did, i.e. no coroutine, socket or timer of the proxy outlived stop().
  bool shutdown() {
    if (!thread_.joinable()) return clean_;
    on_proxy_thread([this] {
      proxy_.stop();
      upstream_.stop();
    });
    work_.reset();
    clean_ = ran_out_.wait_for(10s) == std::future_status::ready;
    if (!clean_) ioc_.stop();
    thread_.join();
    return clean_;
  }

  // Opens a CONNECT tunnel to the upstream for a sandbox; the response is left to the caller.
  std::string connect_to_upstream(const std::string& id = "sbx-a", const std::string& secret = "secret-a") {
    return connect_request("upstream.test:" + std::to_string(upstream_port()), credential(id, secret));
  }

  fake_directory directory;
  fake_resolver resolver;

 private:
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(ioc_);
  system_resolver system_;
  upstream_server upstream_;
  egress_proxy proxy_;
  unsigned short port_ = 0;
  std::thread thread_;
  std::promise<void> ran_out_signal_;  // run() returned: no work was left
  std::future<void> ran_out_;
  bool clean_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<egress_event> events_;
};

// Until pred() holds; false after 10 s (a hang guard, not a timing assumption).
template <typename Pred>
bool eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Sends one request on a fresh connection and reads the answer.
std::optional<raw_response> ask(harness& h, const std::string& request) {
  raw_client c;
  if (c.connect(h.port()) != 0) return std::nullopt;
  if (!c.send_all(request)) return std::nullopt;
  return c.read_response();
}

// A CONNECT tunnel that works, end to end.
bool tunnel_works(harness& h, const std::string& id = "sbx-a", const std::string& secret = "secret-a") {
  raw_client c;
  if (c.connect(h.port()) != 0 || !c.send_all(h.connect_to_upstream(id, secret))) return false;
  auto res = c.read_response();
  if (!res || res->status != 200) return false;
  return c.send_all("ping") && c.read_exact(4) == "ping";
}

}  // namespace

TEST_CASE("proxy: CONNECT to an allowlisted host answers 200 and splices bytes both ways", "[proxy][server]") {
  harness h;
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  // The first bytes of the tunnel ride along with the head: they must reach the upstream first.
  REQUIRE(c.send_all(h.connect_to_upstream() + "early"));
  auto res = c.read_response();
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(c.read_exact(5) == "early");
  std::string big(200'000, 'x');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  REQUIRE(c.send_all(big));
  CHECK(c.read_exact(big.size()) == big);
  CHECK(h.upstream().accepted() == 1);
  auto seen = h.upstream().received();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == "early" + big);
  CHECK(seen[0].find("Proxy-Authorization") == std::string::npos);
  CHECK(h.resolver.calls == 1);
  c.close();
  auto ev = h.event(0);
  CHECK(ev.decision == "allow");
  CHECK(ev.status == 200);
  CHECK(ev.sandbox_id == "sbx-a");
  CHECK(ev.org_id == "org-a");
  CHECK(ev.host == "upstream.test");
  CHECK(ev.port == h.upstream_port());
  CHECK(ev.address == "127.0.0.1");
  CHECK(ev.reason == "closed");
  CHECK(h.shutdown());
}

TEST_CASE("proxy: an absolute-form GET reaches the upstream in origin-form without proxy headers",
          "[proxy][server]") {
  harness h;
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  std::string authority = "upstream.test:" + std::to_string(h.upstream_port());
  REQUIRE(c.send_all("GET http://" + authority + "/some/path?q=1 HTTP/1.1\r\nHost: elsewhere.example\r\n" +
                     credential("sbx-a", "secret-a") +
                     "Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
                     "Keep-Alive: timeout=5\r\nTE: trailers\r\nAccept: */*\r\nX-Custom: kept\r\n\r\n"));
  auto res = c.read_response();
  REQUIRE(res);
  CHECK(res->status == 203);
  CHECK(res->body == "ok");
  // The answer had a length: the client's connection stays open for its next request, which is
  // checked on its own (below).
  auto seen = h.upstream().received();
  REQUIRE(seen.size() == 1);
  const auto& head = seen[0];
  INFO(head);
  CHECK(head.starts_with("GET /some/path?q=1 HTTP/1.1\r\n"));
  CHECK(head.find("Host: " + authority + "\r\n") != std::string::npos);
  CHECK(head.find("elsewhere.example") == std::string::npos);
  CHECK(head.find("Proxy-Authorization") == std::string::npos);
  CHECK(head.find(base64("sbx-a:secret-a")) == std::string::npos);
  CHECK(head.find("Proxy-Connection") == std::string::npos);
  CHECK(head.find("X-Hop") == std::string::npos);
  CHECK(head.find("Keep-Alive") == std::string::npos);
  CHECK(head.find("TE:") == std::string::npos);
  CHECK(head.find("keep-alive") == std::string::npos);
  CHECK(head.find("Connection: close\r\n") != std::string::npos);
  CHECK(head.find("Accept: */*\r\n") != std::string::npos);
  CHECK(head.find("X-Custom: kept\r\n") != std::string::npos);
  auto ev = h.event(0);
  CHECK(ev.decision == "allow");
  CHECK(ev.status == 203);
  CHECK(ev.bytes_out == head.size());
  CHECK(ev.bytes_in > 2);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: a CONNECT tunnel carries a half-close through", "[proxy][server]") {
  harness h;
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  REQUIRE(c.send_all(h.connect_to_upstream()));
  REQUIRE(c.read_response()->status == 200);
  REQUIRE(c.send_all("last words"));
  c.shutdown_write();
  // The upstream still answers after our end of stream, then closes its side too.
  CHECK(c.read_exact(10) == "last words");
  CHECK(c.closes_after_draining());
  CHECK(h.event(0).reason == "closed");
  CHECK(h.shutdown());
}

TEST_CASE("proxy: a second request on a kept-alive connection is checked on its own", "[proxy][server]") {
  harness h;
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  std::string auth = credential("sbx-a", "secret-a");
  REQUIRE(c.send_all("GET http://upstream.test:" + std::to_string(h.upstream_port()) + "/ HTTP/1.1\r\n" + auth +
                     "\r\nGET http://other.test/ HTTP/1.1\r\n" + auth + "\r\n"));
  auto res = c.read_response();
  REQUIRE(res);
  CHECK(res->status == 203);
  auto second = c.read_response();
  REQUIRE(second);
  CHECK(second->status == 403);
  CHECK(c.closes_after_draining());
  CHECK(h.event(0).decision == "allow");
  CHECK(h.event(1).decision == "deny");
  CHECK(h.event_count() == 2);
  CHECK(h.resolver.calls == 1);  // other.test was never even resolved
  CHECK(h.upstream().accepted() == 1);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: method/path rules and deny entries decide each request, CONNECT fails closed",
          "[proxy][server]") {
  harness h;
  h.directory.add("sbx-r", "org-a", "secret-r", {});
  h.directory.set_rules("sbx-r", {"evil.test"}, {{"upstream.test", {"GET"}, {"/ok/*"}}, {"evil.test", {}, {}}});
  std::string auth = credential("sbx-r", "secret-r");
  std::string base = "http://upstream.test:" + std::to_string(h.upstream_port());
  {
    raw_client c;
    REQUIRE(c.connect(h.port()) == 0);
    REQUIRE(c.send_all("GET " + base + "/ok/1 HTTP/1.1\r\n" + auth + "\r\nPOST " + base + "/ok/2 HTTP/1.1\r\n" +
                       auth + "Content-Length: 0\r\n\r\n"));
    auto first = c.read_response();
    REQUIRE(first);
    CHECK(first->status == 203);
    auto second = c.read_response();
    REQUIRE(second);
    CHECK(second->status == 403);
    CHECK(second->body.find(R"(egress_rules[0] {"host":"upstream.test","methods":["GET"],"paths":["/ok/*"]})") !=
          std::string::npos);
    CHECK(h.event(1).reason.starts_with("refused by egress_rules[0]"));
  }
  {
    raw_client c;
    REQUIRE(c.connect(h.port()) == 0);
    REQUIRE(c.send_all("GET " + base + "/ok/../secret HTTP/1.1\r\n" + auth + "\r\n"));
    auto res = c.read_response();
    REQUIRE(res);
    CHECK(res->status == 403);
  }
  {
    raw_client c;
    REQUIRE(c.connect(h.port()) == 0);
    REQUIRE(c.send_all(connect_request("upstream.test:" + std::to_string(h.upstream_port()), auth)));
    auto res = c.read_response();
    REQUIRE(res);
    CHECK(res->status == 403);
    CHECK(res->body.find("needs interception") != std::string::npos);
  }
  {
    raw_client c;  // the deny entry wins over the host-only rule for the same host
    REQUIRE(c.connect(h.port()) == 0);
    REQUIRE(c.send_all(connect_request("evil.test:443", auth)));
    auto res = c.read_response();
    REQUIRE(res);
    CHECK(res->status == 403);
    CHECK(res->body.find("egress_deny[0] \"evil.test\"") != std::string::npos);
  }
  CHECK(h.upstream().accepted() == 1);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: a forwarded request keeps its body and framing", "[proxy][server]") {
  harness h;
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  std::string authority = "upstream.test:" + std::to_string(h.upstream_port());
  REQUIRE(c.send_all("POST http://" + authority + "/submit HTTP/1.1\r\n" + credential("sbx-a", "secret-a") +
                     "Connection: Content-Length\r\nContent-Length: 5\r\n\r\nhello"));
  auto res = c.read_response();
  REQUIRE(res);
  CHECK(res->status == 203);
  // The upstream answers once it has the head; the body may still be on its way: wait for the
  // decision, which comes after both sides are done.
  h.event(0);
  auto seen = h.upstream().received();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].starts_with("POST /submit HTTP/1.1\r\n"));
  CHECK(seen[0].find("Content-Length: 5\r\n") != std::string::npos);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: a host outside the allowlist gets 403 and nothing is dialed", "[proxy][server]") {
  harness h;
  std::string port = std::to_string(h.upstream_port());
  auto res = ask(h, connect_request("other.test:" + port, credential("sbx-a", "secret-a")));
  REQUIRE(res);
  CHECK(res->status == 403);
  // The status line says why: tools show it (pip: "Tunnel connection failed: 403 Forbidden (…)").
  CHECK(res->reason == "Forbidden (host not on the sandbox's egress allowlist)");
  CHECK(res->body == "this sandbox may not reach other.test\n");
  // sbx-b may reach only upstream.test: not the bare suffix of a wildcard, not another sandbox's list
  CHECK(ask(h, connect_request("evil.test:" + port, credential("sbx-b", "secret-b")))->status == 403);
  CHECK(ask(h, connect_request("ip.test:" + port, credential("sbx-a", "secret-a")))->status == 403);
  auto get = ask(h, "GET http://other.test:" + port + "/ HTTP/1.1\r\n" + credential("sbx-a", "secret-a") + "\r\n");
  REQUIRE(get);
  CHECK(get->status == 403);
  CHECK(get->reason == "Forbidden (host not on the sandbox's egress allowlist)");
  CHECK(h.upstream().accepted() == 0);
  CHECK(h.resolver.calls == 0);
  auto ev = h.event(0);
  CHECK(ev.decision == "deny");
  CHECK(ev.status == 403);
  CHECK(ev.host == "other.test");
  CHECK(ev.reason.find("allowlist") != std::string::npos);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: a missing, wrong or deleted credential gets 407 with a challenge", "[proxy][server]") {
  harness h;
  std::string target = "upstream.test:" + std::to_string(h.upstream_port());
  std::vector<std::string> refused{
      "",
      credential("sbx-a", "wrong"),
      credential("sbx-a", "secret-b"),
      credential("sbx-b", "secret-a"),
      credential("sbx-unknown", "secret-a"),
      "Proxy-Authorization: Bearer abc\r\n",
      "Proxy-Authorization: Basic !!!!\r\n",
      "Proxy-Authorization: Basic " + base64("sbx-a") + "\r\n",
      credential("sbx-a", "secret-a") + credential("sbx-a", "secret-a"),
      "Authorization: Basic " + base64("sbx-a:secret-a") + "\r\n",
  };
  for (const auto& headers : refused) {
    INFO(headers);
    auto res = ask(h, connect_request(target, headers));
    REQUIRE(res);
    CHECK(res->status == 407);
    CHECK(res->reason == "Proxy Authentication Required");
    CHECK(res->header("proxy-authenticate") == "Basic realm=\"sandfort\"");
  }
  auto get = ask(h, "GET http://" + target + "/ HTTP/1.1\r\n\r\n");
  REQUIRE(get);
  CHECK(get->status == 407);
  // Deleted: the next connection is refused.
  REQUIRE(tunnel_works(h, "sbx-b", "secret-b"));
  h.directory.remove("sbx-b");
  auto deleted = ask(h, connect_request(target, credential("sbx-b", "secret-b")));
  REQUIRE(deleted);
  CHECK(deleted->status == 407);
  CHECK(h.upstream().accepted() == 1);
  auto ev = h.event(1);
  CHECK(ev.decision == "deny");
  CHECK(ev.status == 407);
  CHECK(ev.reason == "wrong secret");
  CHECK(h.shutdown());
}

TEST_CASE("proxy: an allowlisted name resolving to forbidden addresses gets 403 before any dial",
          "[proxy][server]") {
  harness h;
  auto res = ask(h, connect_request("evil.test:443", credential("sbx-a", "secret-a")));
  REQUIRE(res);
  CHECK(res->status == 403);
  CHECK(res->reason == "Forbidden (address refused by the sandbox's egress policy)");
  CHECK(res->body.find("link-local") != std::string::npos);
  auto get = ask(h, "GET http://evil.test/latest/meta-data/ HTTP/1.1\r\n" + credential("sbx-a", "secret-a") + "\r\n");
  REQUIRE(get);
  CHECK(get->status == 403);
  auto ev = h.event(0);
  CHECK(ev.decision == "deny");
  CHECK(ev.status == 403);
  CHECK(ev.reason.find("169.254.169.254 is link-local") != std::string::npos);
  CHECK(ev.reason.find("10.0.0.1 is private") != std::string::npos);
  CHECK(ev.address.empty());
  CHECK(h.upstream().accepted() == 0);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: without allowed ranges loopback is refused, by name or by literal", "[proxy][server]") {
  auto options = test_options();
  options.allowed_ranges.clear();
  harness h(options);
  std::string port = std::to_string(h.upstream_port());
  for (const std::string& authority : {"upstream.test:" + port, "localhost:" + port, "LocalHost.:" + port}) {
    INFO(authority);
    auto res = ask(h, connect_request(authority, credential("sbx-a", "secret-a")));
    REQUIRE(res);
    CHECK(res->status == 403);
    CHECK(res->body.find("loopback") != std::string::npos);
  }
  auto ev = h.event(1);
  CHECK(ev.reason.find("127.0.0.1 is loopback") != std::string::npos);
  CHECK(ev.reason.find("::1 is loopback") != std::string::npos);
  CHECK(h.upstream().accepted() == 0);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: IP literals in every spelling are resolved, then checked", "[proxy][server]") {
  auto options = test_options();
  options.allowed_ranges.clear();
  harness h(options, /*system_names=*/true);
  h.directory.add("sbx-any", "org-a", "secret-any", {"*"});
  std::string port = std::to_string(h.upstream_port());
  for (std::string host : {"127.0.0.1", "0x7f.1", "2130706433", "0177.0.0.1", "127.1", "[::1]",
                                  "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "0.0.0.0", "localhost"}) {
    INFO(host);
    auto res = ask(h, connect_request(host + ":" + port, credential("sbx-any", "secret-any")));
    REQUIRE(res);
    CHECK(res->status == 403);
  }
  CHECK(h.upstream().accepted() == 0);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: an allowed range lets a literal through, to the address it means", "[proxy][server]") {
  harness h(test_options(), /*system_names=*/true);
  h.directory.add("sbx-any", "org-a", "secret-any", {"*"});
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  std::string decimal = "2130706433:" + std::to_string(h.upstream_port());  // 127.0.0.1 as one number
  REQUIRE(c.send_all(connect_request(decimal, credential("sbx-any", "secret-any"))));
  auto res = c.read_response();
  REQUIRE(res);
  CHECK(res->status == 200);
  REQUIRE(c.send_all("literal"));
  CHECK(c.read_exact(7) == "literal");
  c.close();
  CHECK(h.event(0).address == "127.0.0.1");
  CHECK(h.shutdown());
}

TEST_CASE("proxy: refused addresses are dropped and only the checked one is dialed", "[proxy][server]") {
  harness h;
  REQUIRE(h.upstream().accepted() == 0);
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  std::string mixed = "mixed.test:" + std::to_string(h.upstream_port());
  REQUIRE(c.send_all(connect_request(mixed, credential("sbx-a", "secret-a"))));
  auto res = c.read_response();
  REQUIRE(res);
  CHECK(res->status == 200);
  c.close();
  auto ev = h.event(0);
  CHECK(ev.address == "127.0.0.1");
  CHECK(h.resolver.calls == 1);
  CHECK(h.upstream().accepted() == 1);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: malformed requests get 400 and the proxy serves the next connection", "[proxy][server]") {
  harness h;
  std::string auth = credential("sbx-a", "secret-a");
  std::string up = "upstream.test:" + std::to_string(h.upstream_port());
  std::vector<std::string> bad{
      // header injection
      connect_request(up, auth + "X-Evil: a\rInjected: 1\r\n"),
      connect_request(up, auth + "X-Evil: a\nInjected: 1\r\n"),
      connect_request(up, auth + "X-Evil: a\r\n Injected: 1\r\n"),  // obs-fold
      connect_request(up, auth + std::string("X-Evil: a\0b\r\n", 13)),
      "GET http://" + up + "/ HTTP/1.1\r\n" + auth + "X-Evil: a\r\n\tInjected: 1\r\n\r\n",
      // bad ports
      connect_request("upstream.test:0", auth),
      connect_request("upstream.test:65536", auth),
      connect_request("upstream.test:abc", auth),
      connect_request("upstream.test", auth),
      "GET http://upstream.test:0/ HTTP/1.1\r\n" + auth + "\r\n",
      "GET http://upstream.test:99999/ HTTP/1.1\r\n" + auth + "\r\n",
      // not proxy requests, or not http
      "GET / HTTP/1.1\r\nHost: upstream.test\r\n" + auth + "\r\n",
      "GET https://" + up + "/ HTTP/1.1\r\n" + auth + "\r\n",
      "GET ftp://" + up + "/ HTTP/1.1\r\n" + auth + "\r\n",
      "OPTIONS * HTTP/1.1\r\n" + auth + "\r\n",
      "GET http://user@" + up + "/ HTTP/1.1\r\n" + auth + "\r\n",
      // malformed heads
      "CONNECT " + up + " HTTP/9.9\r\n" + auth + "\r\n",
      "NOT HTTP AT ALL\r\n\r\n",
      "CONNECT  " + up + " HTTP/1.1\r\n" + auth + "\r\n",
      "\x16\x03\x01\x02\x01\x01\xfc\x03\x03\r\n\r\n",
      // oversized head
      connect_request(up, auth + "X-Big: " + std::string(10'000, 'a') + "\r\n"),
      connect_request(up, auth + "X-Big: " + std::string(200'000, 'a') + "\r\n"),
  };
  for (const auto& request : bad) {
    INFO(request.substr(0, 120));
    raw_client c;
    REQUIRE(c.connect(h.port()) == 0);
    c.send_all(request);  // the proxy may stop reading an oversized head before the end
    auto res = c.read_response();
    REQUIRE(res);
    CHECK(res->status == 400);
    CHECK(res->header("connection") == "close");
    CHECK(!res->body.empty());
    CHECK(c.closes_after_draining());
    CHECK(tunnel_works(h));
  }
  CHECK(h.upstream().accepted() == static_cast<int>(bad.size()));  // only the good tunnels
  CHECK(h.shutdown());
}

TEST_CASE("proxy: a client that sends nothing, or half a head, gets no tunnel", "[proxy][server]") {
  auto options = test_options();
  options.header_timeout = 300ms;
  harness h(options);
  raw_client silent, partial;
  REQUIRE(silent.connect(h.port()) == 0);
  REQUIRE(partial.connect(h.port()) == 0);
  REQUIRE(partial.send_all("CONNECT upstream.test:80 HTTP/1.1\r\nHost: x"));
  auto res = partial.read_response();
  REQUIRE(res);
  CHECK(res->status == 400);
  CHECK(silent.closes_after_draining());
  CHECK(tunnel_works(h));
  CHECK(h.upstream().accepted() == 1);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: the tunnel beyond max_tunnels_per_sandbox gets 429, other sandboxes are unaffected",
          "[proxy][server]") {
  auto options = test_options();
  options.max_tunnels_per_sandbox = 3;
  harness h(options);
  std::vector<std::unique_ptr<raw_client>> open;
  for (int i = 0; i < 3; ++i) {
    auto c = std::make_unique<raw_client>();
    REQUIRE(c->connect(h.port()) == 0);
    REQUIRE(c->send_all(h.connect_to_upstream()));
    auto res = c->read_response();
    REQUIRE(res);
    REQUIRE(res->status == 200);
    open.push_back(std::move(c));
  }
  auto over = ask(h, h.connect_to_upstream());
  REQUIRE(over);
  CHECK(over->status == 429);
  auto get = ask(h, "GET http://upstream.test:" + std::to_string(h.upstream_port()) + "/ HTTP/1.1\r\n" +
                        credential("sbx-a", "secret-a") + "\r\n");
  REQUIRE(get);
  CHECK(get->status == 429);
  CHECK(tunnel_works(h, "sbx-b", "secret-b"));
  // Closing one frees its slot (its report comes when the proxy has let go of it).
  open.front()->close();
  h.event_where([](const egress_event& ev) { return ev.sandbox_id == "sbx-a" && ev.decision == "allow"; });
  CHECK(tunnel_works(h));
  CHECK(h.shutdown());
}

TEST_CASE("proxy: disconnect closes the sandbox's tunnels and forgets its counters", "[proxy][server]") {
  harness h;
  raw_client a, b;
  REQUIRE(a.connect(h.port()) == 0);
  REQUIRE(b.connect(h.port()) == 0);
  REQUIRE(a.send_all(h.connect_to_upstream("sbx-a", "secret-a")));
  REQUIRE(b.send_all(h.connect_to_upstream("sbx-b", "secret-b")));
  REQUIRE(a.read_response()->status == 200);
  REQUIRE(b.read_response()->status == 200);
  REQUIRE(a.send_all("abcd"));
  REQUIRE(a.read_exact(4) == "abcd");
  h.on_proxy_thread([&] { h.proxy().disconnect("sbx-a"); });
  CHECK(a.closes_after_draining());
  REQUIRE(b.send_all("efgh"));
  CHECK(b.read_exact(4) == "efgh");
  auto ev = h.event(0);
  CHECK(ev.sandbox_id == "sbx-a");
  CHECK(ev.decision == "allow");
  CHECK(ev.reason == "sandbox disconnected");
  CHECK(ev.bytes_out == 4);
  CHECK(ev.bytes_in == 4);
  CHECK_FALSE(h.on_proxy_thread([&] { return h.proxy().sandbox_traffic("sbx-a"); }));
  CHECK(h.on_proxy_thread([&] { return h.proxy().totals().allowed; }) == 1);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: disconnect also ends a request still waiting for its name", "[proxy][server]") {
  harness h;
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  REQUIRE(c.send_all(connect_request("hang.test:443", credential("sbx-a", "secret-a"))));
  REQUIRE(eventually([&] { return h.resolver.calls == 1; }));  // the lookup is pending
  h.on_proxy_thread([&] { h.proxy().disconnect("sbx-a"); });
  CHECK(c.closes_after_draining());
  auto ev = h.event(0);
  CHECK(ev.decision == "deny");
  CHECK(ev.reason == "sandbox disconnected");
  CHECK(h.shutdown());
}

TEST_CASE("proxy: an idle tunnel is closed after idle_timeout", "[proxy][server]") {
  auto options = test_options();
  options.idle_timeout = 200ms;
  harness h(options);
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  REQUIRE(c.send_all(h.connect_to_upstream()));
  REQUIRE(c.read_response()->status == 200);
  REQUIRE(c.send_all("x"));
  REQUIRE(c.read_exact(1) == "x");
  CHECK(c.closes_after_draining());
  auto ev = h.event(0);
  CHECK(ev.reason == "idle timeout");
  CHECK(ev.bytes_in == 1);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: on_decision and the counters record every decision and its bytes", "[proxy][server]") {
  harness h;
  raw_client c;
  REQUIRE(c.connect(h.port()) == 0);
  REQUIRE(c.send_all(h.connect_to_upstream()));
  REQUIRE(c.read_response()->status == 200);
  REQUIRE(c.send_all("hello"));
  REQUIRE(c.read_exact(5) == "hello");
  c.close();
  auto ev = h.event(0);
  CHECK(ev.decision == "allow");
  CHECK(ev.bytes_out == 5);
  CHECK(ev.bytes_in == 5);
  CHECK(ask(h, connect_request("other.test:80", credential("sbx-a", "secret-a")))->status == 403);
  CHECK(ask(h, connect_request("other.test:80", ""))->status == 407);
  CHECK(h.event_count() == 3);
  auto totals = h.on_proxy_thread([&] { return h.proxy().totals(); });
  CHECK(totals.allowed == 1);
  CHECK(totals.denied == 2);
  CHECK(totals.bytes_in == 5);
  CHECK(totals.bytes_out == 5);
  auto a = h.on_proxy_thread([&] { return h.proxy().sandbox_traffic("sbx-a"); });
  REQUIRE(a);
  CHECK(a->allowed == 1);
  CHECK(a->denied == 1);  // the 407 was nobody's
  CHECK(a->bytes_in == 5);
  CHECK_FALSE(h.on_proxy_thread([&] { return h.proxy().sandbox_traffic("sbx-b"); }));
  CHECK(h.shutdown());
}

TEST_CASE("proxy: unreachable destinations get 502, unresolvable ones too, silent ones 504", "[proxy][server]") {
  auto options = test_options();
  options.connect_timeout = 300ms;
  harness h(options);
  std::string auth = credential("sbx-a", "secret-a");

  // A port on 127.0.0.1 where nothing listens: refused.
  unsigned short closed_port;
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    closed_port = ntohs(addr.sin_port);
    ::close(fd);
  }
  auto refused = ask(h, connect_request("upstream.test:" + std::to_string(closed_port), auth));
  REQUIRE(refused);
  CHECK(refused->status == 502);

  auto unresolvable = ask(h, connect_request("nowhere.test:80", auth));
  REQUIRE(unresolvable);
  CHECK(unresolvable->status == 502);

  // A listener on 127.0.0.1 whose accept queue is full: the kernel drops the SYN, so the
  // connect neither succeeds nor fails — until the proxy's connect_timeout.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 0) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  raw_client filler;  // backlog 0 queues one connection: this one
  REQUIRE(filler.connect(ntohs(addr.sin_port)) == 0);
  auto silent = ask(h, connect_request("upstream.test:" + std::to_string(ntohs(addr.sin_port)), auth));
  ::close(listener);
  REQUIRE(silent);
  CHECK(silent->status == 504);

  auto ev = h.event(2);
  CHECK(ev.reason.find("timed out") != std::string::npos);
  CHECK(h.shutdown());
}

TEST_CASE("proxy: the decision log line has every field and never the credential", "[proxy][server]") {
  auto sink_stream = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*sink_stream);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("proxy-test", sink));
  {
    harness h;
    CHECK(tunnel_works(h));
    CHECK(ask(h, connect_request("evil.test:443", credential("sbx-a", "secret-a")))->status == 403);
    CHECK(ask(h, connect_request("upstream.test:443", credential("sbx-a\" decision=allow", "wrong")))->status == 407);
    CHECK(h.shutdown());  // the tunnel's line is written when it closes
  }
  spdlog::set_default_logger(previous);
  std::string log = sink_stream->str();
  INFO(log);
  CHECK(log.find("egress sandbox=sbx-a org=org-a host=upstream.test port=") != std::string::npos);
  CHECK(log.find("decision=allow reason=\"") != std::string::npos);
  CHECK(log.find("\" status=200 bytes_in=4 bytes_out=4 duration_ms=") != std::string::npos);
  CHECK(log.find("host=evil.test port=443 decision=deny reason=\"refused address:") != std::string::npos);
  CHECK(log.find("status=403") != std::string::npos);
  CHECK(log.find("secret-a") == std::string::npos);
  CHECK(log.find(base64("sbx-a:secret-a")) == std::string::npos);
  // A hostile id cannot forge a field: its space and quote are neutralized.
  CHECK(log.find("sandbox=sbx-a\"?decision=allow") != std::string::npos);
  std::size_t lines = 0;
  for (char ch : log) lines += ch == '\n';
  CHECK(lines == 3);
}

TEST_CASE("proxy: stop closes every connection and leaves nothing running", "[proxy][server]") {
  harness h;
  raw_client tunnel, half, pending;
  REQUIRE(tunnel.connect(h.port()) == 0);
  REQUIRE(tunnel.send_all(h.connect_to_upstream()));
  REQUIRE(tunnel.read_response()->status == 200);
  REQUIRE(half.connect(h.port()) == 0);
  REQUIRE(half.send_all("CONNECT upstream.test:1 HTTP/1.1\r\n"));
  REQUIRE(pending.connect(h.port()) == 0);
  REQUIRE(pending.send_all(connect_request("hang.test:443", credential("sbx-a", "secret-a"))));
  REQUIRE(eventually([&] { return h.resolver.calls == 2; }));
  CHECK(h.on_proxy_thread([&] { return h.proxy().active_connections(); }) == 3);
  CHECK(h.shutdown());  // the io_context ran out of work: no coroutine or socket left behind
  CHECK(tunnel.closes_after_draining());
  CHECK(half.closes_after_draining());
  CHECK(pending.closes_after_draining());
  CHECK(h.event(0).reason == "proxy stopped");
  raw_client late;
  CHECK(late.connect(h.port()) != 0);
}

TEST_CASE("proxy: listen validates its address", "[proxy][server]") {
  asio::io_context ioc;
  fake_directory directory;
  fake_resolver resolver;
  egress_proxy proxy(ioc, {}, directory, resolver);
  CHECK(proxy.listen("no-port").err().code == errc::invalid_argument);
  CHECK(proxy.listen("localhost:3128").err().code == errc::invalid_argument);
  CHECK(proxy.listen("127.0.0.1:65536").err().code == errc::invalid_argument);
  CHECK(proxy.listen("127.0.0.1:abc").err().code == errc::invalid_argument);
  auto port = proxy.listen("127.0.0.1:0");
  REQUIRE(port.ok());
  CHECK(*port != 0);
  auto v6 = proxy.listen("[::1]:0");
  if (!v6.ok()) CHECK(v6.err().code == errc::unavailable);  // no IPv6 on this machine is fine
  proxy.stop();
  ioc.run();
}

// Issue 9: the credential is bound to the sandbox's container as it is now. The tests connect
// from 127.0.0.1, so a sandbox placed elsewhere plays a secret copied into another container (or
// an address Docker has given to someone else); a stopped sandbox has no container to speak for.
TEST_CASE("proxy: a credential from anywhere but its sandbox's current address, or of a sandbox not started, gets 407",
          "[proxy][server]") {
  harness h;
  std::string target = "upstream.test:" + std::to_string(h.upstream_port());
  REQUIRE(tunnel_works(h));
  struct placement {
    std::string state;
    std::string address;
  };
  const placement refused[] = {
      {"started", "127.0.0.2"},  // another container's address
      {"started", ""},           // off the network
      {"started", "not an address"},
      {"stopped", "127.0.0.1"},  // a stale address in a row that is not started
      {"error", "127.0.0.1"},
  };
  for (const auto& p : refused) {
    INFO(p.state << " at '" << p.address << "'");
    h.directory.place("sbx-a", p.state, p.address);
    auto res = ask(h, connect_request(target, credential("sbx-a", "secret-a")));
    REQUIRE(res);
    CHECK(res->status == 407);
    auto ev = h.event_where([](const egress_event& e) { return e.status == 407; });
    CHECK(ev.reason == "source address");
    CHECK(ev.sandbox_id == "sbx-a");
  }
  CHECK(h.upstream().accepted() == 1);  // only the first tunnel reached it
  h.directory.place("sbx-a", "started", "127.0.0.1");
  CHECK(tunnel_works(h));
  CHECK(h.shutdown());
}

// --- caps before authentication, the global tunnel cap, EMFILE ----------------------------------

namespace {

proxy_options capped(std::size_t per_source, std::size_t pending, std::size_t tunnels = 4096) {
  auto o = test_options();
  o.max_pending_per_source = per_source;
  o.max_pending = pending;
  o.max_tunnels = tunnels;
  return o;
}

// Opens n connections from `source` that send nothing.
std::vector<std::unique_ptr<raw_client>> open_silent(harness& h, int n, const char* source = nullptr) {
  std::vector<std::unique_ptr<raw_client>> out;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<raw_client>();
    int rc = c->connect(h.port(), source);
    REQUIRE((rc == 0 || c->reset_at_connect));  // beyond a cap: reset, maybe before connect returned
    out.push_back(std::move(c));
  }
  return out;
}

bool tunnel_works_from(harness& h, const char* source, const std::string& id = "sbx-a",
                       const std::string& secret = "secret-a") {
  raw_client c;
  if (c.connect(h.port(), source) != 0 || !c.send_all(h.connect_to_upstream(id, secret))) return false;
  auto res = c.read_response();
  if (!res || res->status != 200) return false;
  return c.send_all("ping") && c.read_exact(4) == "ping";
}

}  // namespace

TEST_CASE("proxy: beyond max_pending_per_source unauthenticated connections are closed at once",
          "[proxy][server][caps]") {
  harness h(capped(8, 64));
  // A tunnel opened before the flood keeps working through it.
  raw_client before;
  REQUIRE(before.connect(h.port()) == 0);
  REQUIRE(before.send_all(h.connect_to_upstream()));
  REQUIRE(before.read_response()->status == 200);

  auto flood = open_silent(h, 18);
  REQUIRE(eventually([&] { return h.on_proxy_thread([&] { return h.proxy().admission_counts().refused_per_source; }) == 10; }));
  // The first 8 are held (pending their head); the other 10 were closed the moment they were accepted.
  for (int i = 8; i < 18; ++i) CHECK(flood[static_cast<std::size_t>(i)]->closes_after_draining(2s));
  for (int i = 0; i < 8; ++i) CHECK_FALSE(flood[static_cast<std::size_t>(i)]->closed_within(50ms));
  auto counts = h.on_proxy_thread([&] { return h.proxy().admission_counts(); });
  CHECK(counts.pending == 8);
  CHECK(counts.tunnels == 1);
  CHECK(h.on_proxy_thread([&] { return h.proxy().active_connections(); }) == 9);

  // Another source (another sandbox) is served; the old tunnel still carries bytes.
  h.directory.place("sbx-b", "started", "127.0.0.2");
  CHECK(tunnel_works_from(h, "127.0.0.2", "sbx-b", "secret-b"));
  REQUIRE(before.send_all("abcd"));
  CHECK(before.read_exact(4) == "abcd");

  // One of the held connections authenticates: its slot goes back, and the source may open
  // another connection, which gets its tunnel.
  REQUIRE(flood[0]->send_all(h.connect_to_upstream()));
  REQUIRE(flood[0]->read_response()->status == 200);
  CHECK(tunnel_works(h));
  flood.clear();
  REQUIRE(eventually([&] { return h.on_proxy_thread([&] { return h.proxy().admission_counts().pending; }) == 0; }));
  CHECK(h.shutdown());
}

TEST_CASE("proxy: max_pending caps unauthenticated connections of all sources together", "[proxy][server][caps]") {
  harness h(capped(8, 12));
  auto from_one = open_silent(h, 8);
  auto from_two = open_silent(h, 4, "127.0.0.2");
  REQUIRE(eventually([&] { return h.on_proxy_thread([&] { return h.proxy().admission_counts().pending; }) == 12; }));
  raw_client third;
  int rc = third.connect(h.port(), "127.0.0.3");
  REQUIRE((rc == 0 || third.reset_at_connect));
  CHECK(third.closes_after_draining(2s));
  CHECK(h.on_proxy_thread([&] { return h.proxy().admission_counts().refused_pending; }) == 1);
  // A pending connection that authenticates frees its slot for anyone.
  h.directory.place("sbx-b", "started", "127.0.0.2");
  h.directory.place("sbx-a", "started", "127.0.0.3");
  REQUIRE(from_two[0]->send_all(h.connect_to_upstream("sbx-b", "secret-b")));
  REQUIRE(from_two[0]->read_response()->status == 200);
  CHECK(tunnel_works_from(h, "127.0.0.3"));
  CHECK(h.shutdown());
}

TEST_CASE("proxy: a wrong credential keeps its pending slot until the connection ends", "[proxy][server][caps]") {
  harness h(capped(2, 64));
  raw_client a, b;
  REQUIRE(a.connect(h.port()) == 0);
  REQUIRE(b.connect(h.port()) == 0);
  REQUIRE(a.send_all(h.connect_to_upstream("sbx-a", "wrong")));
  REQUIRE(a.read_response()->status == 407);
  // a lingers (drains our answer's reader) and still counts: the source is full.
  raw_client c;
  int rc = c.connect(h.port());
  REQUIRE((rc == 0 || c.reset_at_connect));
  CHECK(c.closes_after_draining(2s));
  a.close();
  REQUIRE(eventually([&] { return h.on_proxy_thread([&] { return h.proxy().admission_counts().pending; }) == 1; }));
  CHECK(tunnel_works(h));
  CHECK(h.shutdown());
}

TEST_CASE("proxy: beyond max_tunnels an authenticated request gets 503", "[proxy][server][caps]") {
  harness h(capped(32, 512, 2));
  raw_client one, two;
  REQUIRE(one.connect(h.port()) == 0);
  REQUIRE(one.send_all(h.connect_to_upstream("sbx-a", "secret-a")));
  REQUIRE(one.read_response()->status == 200);
  REQUIRE(two.connect(h.port()) == 0);
  REQUIRE(two.send_all(h.connect_to_upstream("sbx-b", "secret-b")));
  REQUIRE(two.read_response()->status == 200);
  auto over = ask(h, h.connect_to_upstream("sbx-b", "secret-b"));
  REQUIRE(over);
  CHECK(over->status == 503);
  one.close();
  h.event_where([](const egress_event& ev) { return ev.decision == "allow"; });
  CHECK(tunnel_works(h, "sbx-b", "secret-b"));
  CHECK(h.shutdown());
}

TEST_CASE("proxy: refusals at accept are logged once per source per period", "[proxy][server][caps]") {
  auto sink_stream = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*sink_stream);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("proxy-test", sink));
  {
    harness h(capped(2, 64));
    auto held = open_silent(h, 2);
    auto flood = open_silent(h, 100);
    REQUIRE(eventually([&] { return h.on_proxy_thread([&] { return h.proxy().admission_counts().refused_per_source; }) == 100; }));
    CHECK(h.shutdown());
  }
  spdlog::set_default_logger(previous);
  std::string log = sink_stream->str();
  INFO(log);
  std::size_t lines = 0;
  for (std::size_t at = 0; (at = log.find("at accept", at)) != std::string::npos; ++at) ++lines;
  CHECK(lines == 1);
  CHECK(log.find("from 127.0.0.1 at accept: 2 unauthenticated connections from this address are open "
                 "(egress.max_pending_per_source)") != std::string::npos);
}

TEST_CASE("proxy: out of descriptors, the accept loop pauses instead of spinning", "[proxy][server][caps][exhausts-descriptors]") {
  harness h;
  int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(client >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(h.port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::uint64_t failures = 0;
  std::chrono::microseconds cpu{0};
  {
    sandfort::testing::descriptor_squeeze squeeze;
    REQUIRE(squeeze.exhausted());
    REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
    std::this_thread::sleep_for(50ms);
    auto cpu_before = sandfort::testing::process_cpu_time();
    auto before = h.on_proxy_thread([&] { return h.proxy().admission_counts().accept_failures; });
    std::this_thread::sleep_for(500ms);
    failures = h.on_proxy_thread([&] { return h.proxy().admission_counts().accept_failures; }) - before;
    cpu = sandfort::testing::process_cpu_time() - cpu_before;
  }
  INFO("accept attempts in 500 ms: " << failures << ", cpu " << cpu.count() << " us");
  CHECK(failures >= 2);
  CHECK(failures <= 12);
  CHECK(cpu < 200ms);
  // Descriptors are back: the waiting connection is served.
  std::string request = h.connect_to_upstream();
  REQUIRE(::send(client, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
  pollfd p{client, POLLIN, 0};
  CHECK(::poll(&p, 1, 3000) == 1);
  char buf[64] = {};
  CHECK(::recv(client, buf, sizeof buf - 1, 0) > 12);
  CHECK(std::string(buf).starts_with("HTTP/1.1 200"));
  ::close(client);
  CHECK(h.shutdown());
}
