// The interception unit over real sockets on 127.0.0.1: a client that trusts the organization's
// CA, the interception point, and a real TLS upstream with a certificate of a test CA.
#include "sandfort/secrets/tls_interception.hpp"

#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "sandfort/http/tls_client.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "support/run_coroutine.hpp"

using namespace sandfort;
using namespace sandfort::secrets;
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;

namespace {

struct interception_dir {
  std::string path;
  interception_dir() {
    char tmpl[] = "/tmp/sf-intercept-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~interception_dir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path + "/" + name) << text;
    return path + "/" + name;
  }
};

const std::string request_text = "GET /v1/models HTTP/1.1\r\nHost: upstream.test\r\nAuthorization: Bearer PLACEHOLDER\r\n\r\n";
const std::string answer_text = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

// Reads from s until `until` has arrived (or the stream ends); what was read.
asio::awaitable<std::string> read_until_text(http::any_stream& s, const std::string& until) {
  std::string got;
  char buf[4096];
  while (got.find(until) == std::string::npos) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), use_tuple);
    if (ec) break;
    got.append(buf, n);
  }
  co_return got;
}

asio::awaitable<bool> write_text(http::any_stream& s, const std::string& text) {
  auto [ec, n] = co_await asio::async_write(s, asio::buffer(text), use_tuple);
  co_return !ec && n == text.size();
}

// A TLS server on 127.0.0.1 answering with `cert` (signed by `issuer`): reads one request, records
// it, answers.
struct upstream_server {
  tcp::acceptor acceptor;
  std::shared_ptr<ssl::context> context;
  std::string received;
  upstream_server(asio::io_context& ioc, const certified_key& cert, const interception_ca& issuer)
      : acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        context(make_interception_context(cert, issuer).value()) {}
  tcp::endpoint endpoint() const { return acceptor.local_endpoint(); }

  asio::awaitable<void> serve_one() {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) co_return;
    http::any_stream s(std::move(socket));
    auto [hec] = co_await http::async_start_tls_server(s, *context, use_tuple);
    if (hec) co_return;
    received = co_await read_until_text(s, "\r\n\r\n");
    co_await write_text(s, answer_text);
  }
};

struct interception_result {
  std::optional<error> failure;
  std::string seen_in_the_clear;
};

// The interception point: accepts one client, intercepts for `host`, reads the client's request
// in the clear, passes it on and relays the answer.
asio::awaitable<void> intercept_one(tcp::acceptor& acceptor, std::string host, tcp::endpoint upstream, leaf_cache& leaves,
                                    const interception_ca& ca, std::shared_ptr<ssl::context> upstream_ctx,
                                    interception_result& out) {
  auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
  if (ec) co_return;
  interception_request req{host, {upstream}, 5000ms};
  auto both = co_await intercept(http::any_stream(std::move(socket)), req, leaves, ca, upstream_ctx);
  if (!both) {
    out.failure = both.err();
    co_return;
  }
  out.seen_in_the_clear = co_await read_until_text(both->client, "\r\n\r\n");
  co_await write_text(both->upstream, out.seen_in_the_clear);
  auto answer = co_await read_until_text(both->upstream, "ok");
  co_await write_text(both->client, answer);
}

struct client_result {
  error_code handshake;
  std::string answer;
};

// A client trusting only `trusted` (PEM), through the interception point, as a sandbox would be.
asio::awaitable<client_result> client_request(tcp::endpoint proxy, std::string host, std::string trusted) {
  auto executor = co_await asio::this_coro::executor;
  ssl::context ctx(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  ctx.set_verify_mode(ssl::verify_peer);
  ctx.add_certificate_authority(asio::buffer(trusted));
  http::any_stream s(executor);
  client_result out;
  auto [cec] = co_await s.async_connect(proxy, use_tuple);
  REQUIRE_FALSE(cec);
  s.expires_after(10s);
  auto [hec] = co_await http::async_start_tls_client(s, ctx, host, use_tuple);
  out.handshake = hec;
  if (hec) co_return out;
  co_await write_text(s, request_text);
  out.answer = co_await read_until_text(s, "ok");
  co_return out;
}

const auto now = std::chrono::system_clock::now();

struct scene {
  asio::io_context ioc;
  interception_dir dir;
  // The organization's CA (what the sandbox trusts) and the public world's CA (what the upstream has).
  std::shared_ptr<const interception_ca> org_ca =
      std::make_shared<const interception_ca>(interception_ca::generate("org-1", "acme", now));
  interception_ca world_ca = interception_ca::generate("world", "test web PKI", now);
  leaf_cache leaves{org_ca, 16};
  tcp::acceptor proxy{ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::shared_ptr<ssl::context> upstream_ctx =
      make_upstream_context(upstream_trust{dir.write("world.pem", world_ca.certificate_pem())}).value();
};

}  // namespace

TEST_CASE("a client trusting the org CA handshakes with the interception point and its request is in the clear there") {
  scene s;
  upstream_server upstream(s.ioc, s.world_ca.mint_leaf("upstream.test", now, 24h).value(), s.world_ca);
  interception_result seen;
  asio::co_spawn(s.ioc, upstream.serve_one(), asio::detached);
  asio::co_spawn(s.ioc,
                 intercept_one(s.proxy, "upstream.test", upstream.endpoint(), s.leaves, *s.org_ca, s.upstream_ctx, seen),
                 asio::detached);
  auto r = testing::run_coroutine(
      s.ioc, client_request(s.proxy.local_endpoint(), "upstream.test", s.org_ca->certificate_pem()), 60s);
  INFO(r.handshake.message());
  CHECK_FALSE(seen.failure);
  REQUIRE_FALSE(r.handshake);
  CHECK(seen.seen_in_the_clear == request_text);  // what the proxy will rewrite
  CHECK(upstream.received == request_text);      // reached the real upstream over verified TLS
  CHECK(r.answer.find("200 OK") != std::string::npos);
  CHECK(s.leaves.size() == 1);
}

TEST_CASE("a client that does not trust the org CA refuses the interception point") {
  scene s;
  upstream_server upstream(s.ioc, s.world_ca.mint_leaf("upstream.test", now, 24h).value(), s.world_ca);
  interception_result seen;
  asio::co_spawn(s.ioc, upstream.serve_one(), asio::detached);
  asio::co_spawn(s.ioc,
                 intercept_one(s.proxy, "upstream.test", upstream.endpoint(), s.leaves, *s.org_ca, s.upstream_ctx, seen),
                 asio::detached);
  const auto another_org = interception_ca::generate("org-2", "beta", now);
  auto r = testing::run_coroutine(
      s.ioc, client_request(s.proxy.local_endpoint(), "upstream.test", another_org.certificate_pem()), 60s);
  CHECK(r.handshake);
  CHECK(seen.seen_in_the_clear.empty());
}

TEST_CASE("an upstream whose certificate names another host is refused and never impersonated") {
  scene s;
  upstream_server upstream(s.ioc, s.world_ca.mint_leaf("other.test", now, 24h).value(), s.world_ca);
  interception_result seen;
  asio::co_spawn(s.ioc, upstream.serve_one(), asio::detached);
  asio::co_spawn(s.ioc,
                 intercept_one(s.proxy, "upstream.test", upstream.endpoint(), s.leaves, *s.org_ca, s.upstream_ctx, seen),
                 asio::detached);
  auto r = testing::run_coroutine(
      s.ioc, client_request(s.proxy.local_endpoint(), "upstream.test", s.org_ca->certificate_pem()), 60s);
  REQUIRE(seen.failure);
  INFO(seen.failure->message);
  CHECK(seen.failure->message.find("upstream upstream.test") != std::string::npos);
  CHECK(seen.failure->message.find("hostname mismatch") != std::string::npos);
  CHECK(r.handshake);  // the client got no certificate at all
  CHECK(upstream.received.empty());
}

TEST_CASE("an upstream signed by a CA outside the trust store is refused") {
  scene s;
  const auto rogue = interception_ca::generate("rogue", "not trusted", now);
  upstream_server upstream(s.ioc, rogue.mint_leaf("upstream.test", now, 24h).value(), rogue);
  interception_result seen;
  asio::co_spawn(s.ioc, upstream.serve_one(), asio::detached);
  asio::co_spawn(s.ioc,
                 intercept_one(s.proxy, "upstream.test", upstream.endpoint(), s.leaves, *s.org_ca, s.upstream_ctx, seen),
                 asio::detached);
  auto r = testing::run_coroutine(
      s.ioc, client_request(s.proxy.local_endpoint(), "upstream.test", s.org_ca->certificate_pem()), 60s);
  REQUIRE(seen.failure);
  INFO(seen.failure->message);
  CHECK(seen.failure->message.find("certificate verify failed") != std::string::npos);
  CHECK(r.handshake);
  CHECK(upstream.received.empty());
}

TEST_CASE("an upstream offering only TLS 1.1 is refused") {
  scene s;
  upstream_server upstream(s.ioc, s.world_ca.mint_leaf("upstream.test", now, 24h).value(), s.world_ca);
  SSL_CTX_set_min_proto_version(upstream.context->native_handle(), TLS1_1_VERSION);
  SSL_CTX_set_max_proto_version(upstream.context->native_handle(), TLS1_1_VERSION);
  SSL_CTX_set_security_level(upstream.context->native_handle(), 0);
  interception_result seen;
  asio::co_spawn(s.ioc, upstream.serve_one(), asio::detached);
  asio::co_spawn(s.ioc,
                 intercept_one(s.proxy, "upstream.test", upstream.endpoint(), s.leaves, *s.org_ca, s.upstream_ctx, seen),
                 asio::detached);
  auto r = testing::run_coroutine(
      s.ioc, client_request(s.proxy.local_endpoint(), "upstream.test", s.org_ca->certificate_pem()), 60s);
  REQUIRE(seen.failure);
  CHECK(seen.failure->message.find("upstream upstream.test") != std::string::npos);
  CHECK(r.handshake);
}
