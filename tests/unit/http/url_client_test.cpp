// The URL client against real sockets on 127.0.0.1: tiny servers (plain and TLS) that run on
// the client's own io_context and answer with exact bytes, and certificates made in the test.

#include <catch2/catch.hpp>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "sandfort/http/url_client.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::http;
using namespace sandfort::http::test;
using namespace std::chrono_literals;
using tcp = boost::asio::ip::tcp;
namespace ssl = boost::asio::ssl;

namespace {


// ---- certificates -------------------------------------------------------------------------

using pkey_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using x509_ptr = std::unique_ptr<X509, decltype(&X509_free)>;

pkey_ptr make_key() {
  pkey_ptr key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  if (!key) throw std::runtime_error("EC key generation failed");
  return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) throw std::runtime_error("bad extension " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A CA when san is empty, else a server leaf for san ("DNS:localhost,IP:127.0.0.1").
// issuer null: self-signed with key. Validity spans a day either side, so no clock matters.
x509_ptr make_cert(EVP_PKEY* key, const std::string& cn, const std::string& san, X509* issuer, EVP_PKEY* issuer_key,
                   long serial) {
  x509_ptr cert(X509_new(), X509_free);
  X509* c = cert.get();
  X509_set_version(c, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c), serial);
  X509_gmtime_adj(X509_getm_notBefore(c), -86400);
  X509_gmtime_adj(X509_getm_notAfter(c), 86400);
  X509_set_pubkey(c, key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : c;
  X509_set_issuer_name(c, X509_get_subject_name(signer));
  bool ca = san.empty();
  add_extension(c, signer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  add_extension(c, signer, NID_key_usage, ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
  add_extension(c, signer, NID_subject_key_identifier, "hash");
  if (!ca) {
    add_extension(c, signer, NID_authority_key_identifier, "keyid:always");
    add_extension(c, signer, NID_ext_key_usage, "serverAuth");
    add_extension(c, signer, NID_subject_alt_name, san);
  }
  if (X509_sign(c, issuer_key ? issuer_key : key, EVP_sha256()) <= 0) throw std::runtime_error("signing failed");
  return cert;
}

std::string to_pem(X509* cert) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

// A private CA, written as PEM to a temporary file, that signs server certificates.
class test_ca {
 public:
  test_ca() : key_(make_key()), cert_(make_cert(key_.get(), "sandfort test CA", "", nullptr, nullptr, 1)) {
    char name[] = "/tmp/sandfort-url-ca-XXXXXX";
    int fd = ::mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    ::close(fd);
    pem_path_ = name;
    std::ofstream(pem_path_) << to_pem(cert_.get());
  }
  ~test_ca() { ::unlink(pem_path_.c_str()); }
  test_ca(const test_ca&) = delete;
  test_ca& operator=(const test_ca&) = delete;

  const std::string& pem_path() const { return pem_path_; }

  // A server context presenting a fresh leaf for san, signed by this CA.
  std::shared_ptr<ssl::context> server_context(const std::string& san) {
    auto leaf_key = make_key();
    auto leaf = make_cert(leaf_key.get(), "test server", san, cert_.get(), key_.get(), ++serial_);
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    if (SSL_CTX_use_certificate(ctx->native_handle(), leaf.get()) != 1 ||
        SSL_CTX_use_PrivateKey(ctx->native_handle(), leaf_key.get()) != 1)
      throw std::runtime_error("cannot load the server certificate");
    return ctx;
  }

 private:
  pkey_ptr key_;
  x509_ptr cert_;
  std::string pem_path_;
  long serial_ = 1;
};

// ---- servers --------------------------------------------------------------------------------

// What the server saw: each request head, and the SNI name of each TLS handshake.
struct server_log {
  int connections = 0;
  std::vector<std::string> requests;
  std::vector<std::string> server_names;
};

// What a test server does with each connection.
struct server_script {
  std::optional<std::string> reply;       // nullopt: read the request, then stay silent
  std::shared_ptr<ssl::context> tls;      // null: plain TCP
  std::size_t piece = 0;                  // 0: write the reply at once; else in pieces this size,
  std::chrono::milliseconds pause{0};     // each after this pause
};

template <typename Stream>
asio::awaitable<void> write_reply(Stream& stream, const server_script& script) {
  std::string_view rest = *script.reply;
  std::size_t piece = script.piece ? script.piece : rest.size();
  asio::steady_timer timer(stream.get_executor());
  while (!rest.empty()) {
    if (script.pause.count()) {
      timer.expires_after(script.pause);
      co_await timer.async_wait(use_tuple);
    }
    auto part = rest.substr(0, piece);
    auto [ec, n] = co_await asio::async_write(stream, asio::buffer(part.data(), part.size()), use_tuple);
    if (ec) co_return;
    rest.remove_prefix(part.size());
  }
}

// Reads a request head, records it, then writes the scripted reply and closes; with no reply it
// keeps the connection open and silent until the client gives up.
template <typename Stream>
asio::awaitable<void> answer(Stream& stream, std::shared_ptr<const server_script> script,
                             std::shared_ptr<server_log> log) {
  std::string head;
  auto [rec, n] = co_await asio::async_read_until(stream, asio::dynamic_buffer(head), "\r\n\r\n", use_tuple);
  if (rec) co_return;
  log->requests.push_back(head.substr(0, n));
  if (!script->reply) {
    char byte = 0;
    co_await stream.async_read_some(asio::buffer(&byte, 1), use_tuple);
    co_return;
  }
  co_await write_reply(stream, *script);
}

asio::awaitable<void> serve_connection(tcp::socket socket, std::shared_ptr<const server_script> script,
                                       std::shared_ptr<server_log> log) {
  if (!script->tls) {
    co_await answer(socket, script, log);
    co_return;
  }
  ssl::stream<tcp::socket> stream(std::move(socket), *script->tls);
  auto [ec] = co_await stream.async_handshake(ssl::stream_base::server, use_tuple);
  const char* sni = SSL_get_servername(stream.native_handle(), TLSEXT_NAMETYPE_host_name);
  log->server_names.push_back(sni ? sni : "");
  if (!ec) co_await answer(stream, script, log);
}

asio::awaitable<void> accept_loop(tcp::acceptor acceptor, std::shared_ptr<const server_script> script,
                                  std::shared_ptr<server_log> log) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) co_return;
    ++log->connections;
    asio::co_spawn(acceptor.get_executor(), serve_connection(std::move(socket), script, log), asio::detached);
  }
}

// A server on 127.0.0.1:<ephemeral> that runs on ioc, next to the client under test. Its
// coroutines own what they use, so they may outlive this handle until ioc is destroyed.
class test_server {
 public:
  test_server(asio::io_context& ioc, server_script script) : log_(std::make_shared<server_log>()) {
    tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port_ = acceptor.local_endpoint().port();
    auto shared = std::make_shared<const server_script>(std::move(script));
    asio::co_spawn(ioc, accept_loop(std::move(acceptor), shared, log_), asio::detached);
  }
  test_server(asio::io_context& ioc, std::optional<std::string> reply, std::shared_ptr<ssl::context> tls = nullptr)
      : test_server(ioc, server_script{std::move(reply), std::move(tls)}) {}

  unsigned short port() const { return port_; }
  const server_log& log() const { return *log_; }
  std::string url(const std::string& scheme, const std::string& host, const std::string& target = "/") const {
    return scheme + "://" + host + ":" + std::to_string(port_) + target;
  }

 private:
  std::shared_ptr<server_log> log_;
  unsigned short port_ = 0;
};

std::string ok_reply(const std::string& body, const std::string& extra_headers = "") {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra_headers + "\r\n" + body;
}

url_fetch_options plain_allowed() {
  url_fetch_options o;
  o.allow_plain_http = true;
  o.timeout = 5s;
  return o;
}

result<response> fetch(asio::io_context& ioc, const std::string& url, url_fetch_options options) {
  return run_on(ioc, fetch_url(url, std::move(options)));
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A port with nothing listening: bound, then closed again.
unsigned short closed_port(asio::io_context& ioc) {
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

}  // namespace

// ---- parsing --------------------------------------------------------------------------------

TEST_CASE("url_client: parse_url splits scheme, host, port and target", "[url_client]") {
  auto a = parse_url("https://IdP.Example.COM/realms/x/.well-known/openid-configuration");
  REQUIRE(a.ok());
  CHECK(a->scheme == "https");
  CHECK(a->host == "idp.example.com");
  CHECK(a->port == 443);
  CHECK(a->target == "/realms/x/.well-known/openid-configuration");
  CHECK(host_header(*a) == "idp.example.com");

  auto b = parse_url("HTTP://127.0.0.1:8080");
  REQUIRE(b.ok());
  CHECK(b->scheme == "http");
  CHECK(b->port == 8080);
  CHECK(b->target == "/");
  CHECK(host_header(*b) == "127.0.0.1:8080");

  auto c = parse_url("https://[::1]:8443/jwks?kid=a#fragment");
  REQUIRE(c.ok());
  CHECK(c->host == "::1");
  CHECK(c->port == 8443);
  CHECK(c->target == "/jwks?kid=a");
  CHECK(host_header(*c) == "[::1]:8443");

  auto d = parse_url("https://[2001:DB8::7]?x=1");
  REQUIRE(d.ok());
  CHECK(d->host == "2001:db8::7");
  CHECK(d->port == 443);
  CHECK(d->target == "/?x=1");
  CHECK(host_header(*d) == "[2001:db8::7]");

  auto e = parse_url("http://idp_1.local:/p");
  REQUIRE(e.ok());
  CHECK(e->port == 80);
  CHECK(e->target == "/p");
  CHECK(host_header(*e) == "idp_1.local");
}

TEST_CASE("url_client: parse_url refuses malformed and unsupported URLs", "[url_client]") {
  for (const char* url :
       {"", "idp.example.com", "https//idp.example.com", "http:/idp", "ftp://idp.example.com/", "file:///etc/passwd",
        "https://", "https:///path", "https://:443/", "https://idp:0/", "https://idp:65536/", "https://idp:123456/",
        "https://idp:44a/", "https://user:pw@idp/", "https://@idp/", "https://[::1/", "https://[::1]x/",
        "https://[not-v6]/", "https://[fe80::1%25eth0]/", "https://id p/", "https://idp/a b", "https://idp/\r\nX: y",
        "https://idp/\x7f", "https://id\xc3\xa9.example/", "https://idp:443:1/", "https://idp%2e.example/"}) {
    INFO(url);
    auto parsed = parse_url(url);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.err().code == errc::invalid_argument);
  }
  // A URL with credentials is refused without repeating them.
  CHECK_FALSE(contains(parse_url("https://user:hunter2@idp/").err().message, "hunter2"));
}

TEST_CASE("url_client: fetch_url refuses malformed URLs and plain http unless allowed", "[url_client]") {
  asio::io_context ioc;
  test_server server(ioc, ok_reply("{}"));
  auto malformed = fetch(ioc, "https://idp:99999/", plain_allowed());
  REQUIRE_FALSE(malformed.ok());
  CHECK(malformed.err().code == errc::invalid_argument);

  auto refused = fetch(ioc, server.url("http", "127.0.0.1"), url_fetch_options{});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::invalid_argument);
  CHECK(contains(refused.err().message, "127.0.0.1"));
  CHECK(server.log().connections == 0);

  auto allowed = fetch(ioc, server.url("http", "127.0.0.1"), plain_allowed());
  REQUIRE(allowed.ok());
  CHECK(server.log().connections == 1);
}

// ---- plain HTTP -----------------------------------------------------------------------------

TEST_CASE("url_client: GET returns status and body and sends the expected request", "[url_client]") {
  asio::io_context ioc;
  test_server server(ioc, ok_reply(R"({"issuer":"x"})", "X-Extra: 1\r\n"));
  auto res = fetch(ioc, server.url("http", "127.0.0.1", "/.well-known/openid-configuration?a=1#frag"), plain_allowed());
  REQUIRE(res.ok());
  CHECK(res->result_int() == 200);
  CHECK(res->body() == R"({"issuer":"x"})");
  CHECK((*res)["X-Extra"] == "1");

  REQUIRE(server.log().requests.size() == 1);
  const auto& head = server.log().requests[0];
  CHECK(head.rfind("GET /.well-known/openid-configuration?a=1 HTTP/1.1\r\n", 0) == 0);
  CHECK(contains(head, "Host: 127.0.0.1:" + std::to_string(server.port()) + "\r\n"));
  CHECK(contains(head, "Accept: application/json\r\n"));
  CHECK(contains(head, "User-Agent: sandfortd\r\n"));
  CHECK(contains(head, "Connection: close\r\n"));
}

TEST_CASE("url_client: any status comes back as is and a redirect is not followed", "[url_client]") {
  asio::io_context ioc;
  test_server redirecting(ioc, "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n");
  auto res = fetch(ioc, redirecting.url("http", "127.0.0.1", "/jwks"), plain_allowed());
  REQUIRE(res.ok());
  CHECK(res->result_int() == 302);
  CHECK((*res)["Location"] == "/elsewhere");
  CHECK(redirecting.log().connections == 1);
  CHECK(redirecting.log().requests.size() == 1);

  test_server failing(ioc, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\ndown");
  auto down = fetch(ioc, failing.url("http", "127.0.0.1"), plain_allowed());
  REQUIRE(down.ok());
  CHECK(down->result_int() == 503);
  CHECK(down->body() == "down");
}

TEST_CASE("url_client: a body delimited by the end of the connection is read whole", "[url_client]") {
  asio::io_context ioc;
  test_server server(ioc, std::string("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n") + R"({"keys":[]})");
  auto res = fetch(ioc, server.url("http", "127.0.0.1"), plain_allowed());
  REQUIRE(res.ok());
  CHECK(res->body() == R"({"keys":[]})");
}

TEST_CASE("url_client: the body limit is an error, never a truncation", "[url_client]") {
  asio::io_context ioc;
  auto options = plain_allowed();
  options.body_limit = 1000;
  const std::string marker = "SECRET-BODY-MARKER";

  test_server at_limit(ioc, ok_reply(marker + std::string(1000 - marker.size(), 'x')));
  auto fits = fetch(ioc, at_limit.url("http", "127.0.0.1"), options);
  REQUIRE(fits.ok());
  CHECK(fits->body().size() == 1000);

  test_server sized(ioc, ok_reply(marker + std::string(1001 - marker.size(), 'x')));
  auto too_big = fetch(ioc, sized.url("http", "127.0.0.1"), options);
  REQUIRE_FALSE(too_big.ok());
  CHECK(too_big.err().code == errc::unavailable);
  CHECK(contains(too_big.err().message, "127.0.0.1"));
  CHECK(contains(too_big.err().message, "1000 bytes"));
  CHECK_FALSE(contains(too_big.err().message, marker));

  std::string chunks;
  for (int i = 0; i < 5; ++i) chunks += "12c\r\n" + marker + std::string(300 - marker.size(), 'y') + "\r\n";
  test_server chunked(ioc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n");
  auto streamed = fetch(ioc, chunked.url("http", "127.0.0.1"), options);
  REQUIRE_FALSE(streamed.ok());
  CHECK(streamed.err().code == errc::unavailable);
  CHECK_FALSE(contains(streamed.err().message, marker));
}

TEST_CASE("url_client: response headers over 16 KiB are refused", "[url_client]") {
  asio::io_context ioc;
  test_server small(ioc, ok_reply("{}", "X-Pad: " + std::string(15000, 'p') + "\r\n"));
  CHECK(fetch(ioc, small.url("http", "127.0.0.1"), plain_allowed()).ok());

  test_server large(ioc, ok_reply("{}", "X-Pad: " + std::string(17000, 'p') + "\r\n"));
  auto res = fetch(ioc, large.url("http", "127.0.0.1"), plain_allowed());
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
  CHECK(contains(res.err().message, "headers"));
}

TEST_CASE("url_client: a response that is not HTTP is unavailable and not echoed", "[url_client]") {
  asio::io_context ioc;
  test_server server(ioc, "SSH-2.0-SECRET-BODY-MARKER\r\n\r\n");
  auto res = fetch(ioc, server.url("http", "127.0.0.1"), plain_allowed());
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
  CHECK_FALSE(contains(res.err().message, "SECRET"));
}

TEST_CASE("url_client: a silent server is unavailable within the timeout", "[url_client]") {
  asio::io_context ioc;
  test_server silent(ioc, std::nullopt);
  auto options = plain_allowed();
  options.timeout = 300ms;

  auto t0 = std::chrono::steady_clock::now();
  auto res = fetch(ioc, silent.url("http", "127.0.0.1"), options);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
  CHECK(contains(res.err().message, "no answer within 300 ms"));
  CHECK(elapsed >= 250ms);
  CHECK(elapsed < 3s);
  CHECK(silent.log().requests.size() == 1);  // it was the answer that never came

  // The deadline covers the TLS handshake too: the same silent server never answers a ClientHello.
  test_ca ca;
  options.ca_file = ca.pem_path();
  t0 = std::chrono::steady_clock::now();
  auto tls = fetch(ioc, silent.url("https", "127.0.0.1"), options);
  elapsed = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(tls.ok());
  CHECK(tls.err().code == errc::unavailable);
  CHECK(contains(tls.err().message, "TLS handshake"));
  CHECK(elapsed < 3s);
}

TEST_CASE("url_client: a spent deadline fails the exchange even against a prompt server", "[url_client]") {
  asio::io_context ioc;
  test_server server(ioc, ok_reply("{}"));
  auto options = plain_allowed();
  options.timeout = 0ms;
  auto res = fetch(ioc, server.url("http", "localhost"), options);
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
  CHECK(contains(res.err().message, "no answer within 0 ms"));
  CHECK(server.log().requests.empty());
}

TEST_CASE("url_client: the timeout bounds the whole exchange, not each read", "[url_client]") {
  asio::io_context ioc;
  // Every piece comes well within the timeout, the whole answer well after it.
  auto reply = ok_reply(std::string(40, 'z'));
  test_server trickling(ioc, server_script{reply, nullptr, reply.size() / 10 + 1, 100ms});
  auto options = plain_allowed();
  options.timeout = 400ms;
  auto res = fetch(ioc, trickling.url("http", "127.0.0.1"), options);
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
  CHECK(contains(res.err().message, "no answer within 400 ms"));

  options.timeout = 5s;
  auto patient = fetch(ioc, trickling.url("http", "127.0.0.1"), options);
  REQUIRE(patient.ok());
  CHECK(patient->body() == std::string(40, 'z'));
}

TEST_CASE("url_client: refused connections and unknown names are unavailable", "[url_client]") {
  asio::io_context ioc;
  auto port = closed_port(ioc);
  auto refused = fetch(ioc, "http://127.0.0.1:" + std::to_string(port) + "/", plain_allowed());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::unavailable);
  CHECK(contains(refused.err().message, "127.0.0.1:" + std::to_string(port)));
  CHECK(contains(refused.err().message, "connect"));

  // .invalid never resolves (RFC 6761); without a resolver at all, the timeout still ends it.
  auto options = plain_allowed();
  options.timeout = 2s;
  auto unknown = fetch(ioc, "https://sandfort-test.invalid/jwks", options);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.err().code == errc::unavailable);
  CHECK(contains(unknown.err().message, "sandfort-test.invalid"));
  CHECK(contains(unknown.err().message, "name lookup"));
}

// ---- HTTPS ----------------------------------------------------------------------------------

TEST_CASE("url_client: HTTPS verifies the chain against ca_file and sends SNI for names", "[url_client]") {
  asio::io_context ioc;
  test_ca ca;
  test_server server(ioc, ok_reply(R"({"keys":[1]})"), ca.server_context("DNS:localhost,IP:127.0.0.1"));
  url_fetch_options options;
  options.ca_file = ca.pem_path();

  auto by_name = fetch(ioc, server.url("https", "localhost", "/jwks"), options);
  REQUIRE(by_name.ok());
  CHECK(by_name->result_int() == 200);
  CHECK(by_name->body() == R"({"keys":[1]})");
  REQUIRE(server.log().requests.size() == 1);
  CHECK(contains(server.log().requests[0], "Host: localhost:" + std::to_string(server.port()) + "\r\n"));
  CHECK(server.log().server_names.back() == "localhost");

  // An IP literal is checked against the IP SAN and is never sent as SNI.
  auto by_address = fetch(ioc, server.url("https", "127.0.0.1", "/jwks"), options);
  REQUIRE(by_address.ok());
  CHECK(by_address->body() == R"({"keys":[1]})");
  CHECK(server.log().server_names.back().empty());
}

TEST_CASE("url_client: HTTPS with a private CA fails against the system trust store", "[url_client]") {
  asio::io_context ioc;
  test_ca ca;
  test_server server(ioc, ok_reply("{}"), ca.server_context("DNS:localhost,IP:127.0.0.1"));
  auto res = fetch(ioc, server.url("https", "localhost"), url_fetch_options{});
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
  CHECK(contains(res.err().message, "localhost:" + std::to_string(server.port())));
  CHECK(contains(res.err().message, "certificate verify failed"));
  CHECK(server.log().requests.empty());
}

TEST_CASE("url_client: HTTPS refuses a certificate for another host name", "[url_client]") {
  asio::io_context ioc;
  test_ca ca;
  test_server server(ioc, ok_reply("{}"), ca.server_context("DNS:other.example,IP:10.9.8.7"));
  url_fetch_options options;
  options.ca_file = ca.pem_path();
  for (const char* host : {"localhost", "127.0.0.1"}) {
    INFO(host);
    auto res = fetch(ioc, server.url("https", host), options);
    REQUIRE_FALSE(res.ok());
    CHECK(res.err().code == errc::unavailable);
    CHECK(contains(res.err().message, "hostname mismatch"));
  }
  CHECK(server.log().requests.empty());
}

TEST_CASE("url_client: an unreadable ca_file is unavailable and names the file", "[url_client]") {
  asio::io_context ioc;
  url_fetch_options options;
  options.ca_file = "/nonexistent/sandfort-ca.pem";
  auto res = fetch(ioc, "https://localhost:1/", options);
  REQUIRE_FALSE(res.ok());
  CHECK(res.err().code == errc::unavailable);
  CHECK(contains(res.err().message, "/nonexistent/sandfort-ca.pem"));
}

// ---- what the webhook worker uses ------------------------------------------------------------

TEST_CASE("url_client: post_body sends its body and headers, a refused address is never dialed", "[url_client]") {
  asio::io_context ioc;
  test_server server(ioc, ok_reply("ok"));
  auto options = plain_allowed();
  header_list headers = {{"Sandfort-Event-Id", "org-1:7"}, {"Sandfort-Signature", "t=1,v1=ab"}};
  auto sent = run_on(ioc, post_body(server.url("http", "127.0.0.1", "/hook"), "application/json", R"({"seq":7})",
                                    headers, options));
  REQUIRE(sent.ok());
  CHECK(sent->result_int() == 200);
  REQUIRE(server.log().requests.size() == 1);
  const auto& head = server.log().requests[0];
  CHECK(head.rfind("POST /hook HTTP/1.1\r\n", 0) == 0);
  CHECK(contains(head, "Content-Type: application/json\r\n"));
  CHECK(contains(head, "Sandfort-Event-Id: org-1:7\r\n"));
  CHECK(contains(head, "Sandfort-Signature: t=1,v1=ab\r\n"));

  // Every address is shown to the check before any is dialed; one refusal refuses the request.
  std::vector<std::string> shown;
  options.refuse_address = [&shown](const asio::ip::address& a) -> std::optional<std::string> {
    shown.push_back(a.to_string());
    return a.to_string() + " is loopback";
  };
  auto refused = run_on(ioc, post_body(server.url("http", "127.0.0.1", "/hook"), "application/json", "{}", {}, options));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::permission_denied);
  CHECK(contains(refused.err().message, "resolves to 127.0.0.1: 127.0.0.1 is loopback"));
  CHECK(shown == std::vector<std::string>{"127.0.0.1"});
  CHECK(server.log().connections == 1);  // the first request's only
}

TEST_CASE("url_client: with truncate_body a large answer is cut at the limit and its status kept", "[url_client]") {
  asio::io_context ioc;
  auto options = plain_allowed();
  options.body_limit = 1000;
  options.truncate_body = true;
  test_server sized(ioc, ok_reply(std::string(5000, 'x')));
  auto cut = run_on(ioc, post_body(sized.url("http", "127.0.0.1"), "application/json", "{}", {}, options));
  REQUIRE(cut.ok());
  CHECK(cut->result_int() == 200);
  CHECK(cut->body().empty());
  std::string chunks;
  for (int i = 0; i < 5; ++i) chunks += "12c\r\n" + std::string(300, 'y') + "\r\n";
  test_server chunked(ioc, "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n");
  auto streamed = run_on(ioc, post_body(chunked.url("http", "127.0.0.1"), "application/json", "{}", {}, options));
  REQUIRE(streamed.ok());
  CHECK(streamed->result_int() == 201);
}
