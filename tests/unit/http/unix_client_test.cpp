// The server on a unix socket and the unix-socket client, including peers that are absent or
// silent: those must be `unavailable` errors, never hangs.

#include <catch2/catch.hpp>

#include <boost/asio/detached.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sandfort/core/ids.hpp"
#include "sandfort/http/client.hpp"
#include "sandfort/http/server.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::http;
using namespace sandfort::http::test;
using nlohmann::json;
using namespace std::chrono_literals;
using unix_socket = boost::asio::local::stream_protocol;

namespace {

// A short path (unix socket paths must stay under 108 bytes), removed afterwards.
struct socket_path {
  std::string path = "/tmp/sfh-" + random_hex(6) + ".sock";
  ~socket_path() { ::unlink(path.c_str()); }
};

handler echo_handler() {
  return [](context& ctx) -> asio::awaitable<response> {
    json body = {{"method", std::string(ctx.req.method_string())}, {"path", ctx.path}, {"body", ctx.req.body()}};
    co_return json_response(200, body);
  };
}

}  // namespace

TEST_CASE("http: unix_request talks to a server on listen_unix", "[http][unix]") {
  socket_path sock;
  asio::io_context ioc;
  server srv(ioc, {}, echo_handler());
  REQUIRE(srv.listen_unix(sock.path).ok());

  json payload = {{"x", 1}};
  auto req = make_request(verb::post, "/exec?a=b", &payload);
  client_options options;
  auto res = run_on(ioc, unix_request(sock.path, std::move(req), options));
  REQUIRE(res.ok());
  CHECK(res->result_int() == 200);
  CHECK(res->find("X-Request-Id") != res->end());
  auto body = json::parse(res->body());
  CHECK(body["method"] == "POST");
  CHECK(body["path"] == "/exec");
  CHECK(json::parse(body["body"].get<std::string>()) == payload);

  // A second call on a new connection works as well.
  auto req2 = make_request(verb::get, "/health");
  auto res2 = run_on(ioc, unix_request(sock.path, std::move(req2), options));
  REQUIRE(res2.ok());
  CHECK(json::parse(res2->body())["method"] == "GET");
  srv.stop();
}

TEST_CASE("http: listen_unix replaces a stale file and fails on a missing directory", "[http][unix]") {
  socket_path sock;
  { std::ofstream(sock.path) << "stale"; }
  asio::io_context ioc;
  server srv(ioc, {}, echo_handler());
  REQUIRE(srv.listen_unix(sock.path).ok());
  auto req = make_request(verb::get, "/after-stale");
  client_options options;
  auto res = run_on(ioc, unix_request(sock.path, std::move(req), options));
  REQUIRE(res.ok());
  CHECK(res->result_int() == 200);

  auto bad = srv.listen_unix("/tmp/sfh-no-such-dir-" + random_hex(4) + "/s.sock");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().code == errc::unavailable);
  srv.stop();
}

TEST_CASE("http: unix_request to a missing socket is unavailable at once", "[http][unix]") {
  socket_path sock;  // never created
  asio::io_context ioc;
  auto req = make_request(verb::get, "/health");
  client_options options;
  auto t0 = std::chrono::steady_clock::now();
  auto res = run_on(ioc, unix_request(sock.path, std::move(req), options));
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
  CHECK(res.err().message.find(sock.path) != std::string::npos);
}

TEST_CASE("http: unix_request to a peer that never answers is unavailable after the timeout", "[http][unix]") {
  socket_path sock;
  asio::io_context ioc;
  unix_socket::acceptor acceptor(ioc, unix_socket::endpoint(sock.path));
  // Accepts and holds the connection without ever reading or writing.
  std::optional<unix_socket::socket> held;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto s = co_await acceptor.async_accept(asio::use_awaitable);
        held.emplace(std::move(s));
      },
      asio::detached);

  auto req = make_request(verb::get, "/health");
  client_options options;
  options.connect_timeout = 1s;
  options.timeout = 200ms;
  auto t0 = std::chrono::steady_clock::now();
  auto res = run_on(ioc, unix_request(sock.path, std::move(req), options), 10s);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
  CHECK(res.err().message.find("200 ms") != std::string::npos);
  CHECK(held.has_value());  // it really was accepted
  CHECK(elapsed >= 190ms);
  CHECK(elapsed < 3s);
}

TEST_CASE("http: unix_request reports a peer that closes without answering", "[http][unix]") {
  socket_path sock;
  asio::io_context ioc;
  unix_socket::acceptor acceptor(ioc, unix_socket::endpoint(sock.path));
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto s = co_await acceptor.async_accept(asio::use_awaitable);
        s.close();
      },
      asio::detached);
  auto req = make_request(verb::get, "/health");
  client_options options;
  auto res = run_on(ioc, unix_request(sock.path, std::move(req), options), 10s);
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
}
