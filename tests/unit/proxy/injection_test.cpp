// Secret injection as pure functions (include/sandfort/proxy/injection.hpp): where a placeholder
// becomes the value on the way out, where it is left alone, and the value taken out of answers.
#include <catch2/catch.hpp>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "sandfort/core/base64.hpp"
#include "sandfort/proxy/injection.hpp"

using namespace sandfort;
using namespace sandfort::proxy;
namespace bhttp = boost::beast::http;

namespace {

const std::string placeholder = "sfph_0123456789abcdef0123456789abcdef";
const std::string value = "sk-live-REAL";

bhttp::request_header<> parse(const std::string& raw) {
  bhttp::request_parser<bhttp::empty_body> p;
  boost::system::error_code ec;
  p.put(boost::asio::buffer(raw), ec);
  REQUIRE(p.is_header_done());
  return p.get().base();
}

injected_secret header_secret() {
  injected_secret s;
  s.name = "openai";
  s.placeholder = placeholder;
  s.hosts = {"api.example.com", "*.models.example"};
  s.placement.type = secrets::placement::kind::header;
  s.placement.header = "Authorization";
  s.placement.format = "Bearer {value}";
  s.value = value;
  return s;
}

}  // namespace

TEST_CASE("a header placement puts the value in the format, for the bound hosts only") {
  auto head = parse("GET /v1/models HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " + placeholder +
                    "\r\nX-Other: " + placeholder + "\r\nAccept-Encoding: gzip\r\n\r\n");
  auto out = intercepted_request_head(head, "api.example.com", "api.example.com", {header_secret()});
  CHECK(out.injected == std::vector<std::string>{"openai"});
  CHECK(out.head.find("Authorization: Bearer " + value + "\r\n") != std::string::npos);
  // Anywhere else the placeholder stays.
  CHECK(out.head.find("X-Other: " + placeholder + "\r\n") != std::string::npos);
  // Answers come back in the clear, so that an echoed value can be taken out.
  CHECK(out.head.find("Accept-Encoding: identity\r\n") != std::string::npos);
  CHECK(out.head.find("gzip") == std::string::npos);
  CHECK(out.head.starts_with("GET /v1/models HTTP/1.1\r\n"));

  auto wildcard = intercepted_request_head(head, "eu.models.example", "eu.models.example", {header_secret()});
  CHECK(wildcard.injected.size() == 1);
  for (const char* other : {"api.example.com.evil.test", "example.com", "models.example", "evil.test"}) {
    auto elsewhere = intercepted_request_head(head, other, other, {header_secret()});
    CHECK(elsewhere.injected.empty());
    CHECK(elsewhere.head.find(value) == std::string::npos);
    CHECK(elsewhere.head.find("Authorization: Bearer " + placeholder) != std::string::npos);
    CHECK(elsewhere.head.find("Accept-Encoding: gzip") != std::string::npos);
  }
}

TEST_CASE("a header without the placeholder is not touched, and a value with a line break is never put in") {
  auto head = parse("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer mine\r\n\r\n");
  auto out = intercepted_request_head(head, "api.example.com", "api.example.com", {header_secret()});
  CHECK(out.injected.empty());
  CHECK(out.head.find("Authorization: Bearer mine\r\n") != std::string::npos);

  auto s = header_secret();
  s.value = "abc\r\nX-Injected: 1";
  auto with = parse("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " + placeholder + "\r\n\r\n");
  auto refused = intercepted_request_head(with, "api.example.com", "api.example.com", {s});
  CHECK(refused.injected.empty());
  CHECK(refused.head.find("X-Injected") == std::string::npos);
}

TEST_CASE("hop-by-hop headers are dropped and Host is added when absent") {
  auto head = parse("POST /x HTTP/1.1\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\n"
                    "Proxy-Authorization: Basic abc\r\nUpgrade: h2c\r\nContent-Length: 3\r\n\r\n");
  auto out = intercepted_request_head(head, "api.example.com", "api.example.com:8443", {});
  CHECK(out.head == "POST /x HTTP/1.1\r\nHost: api.example.com:8443\r\nContent-Length: 3\r\n\r\n");
}

TEST_CASE("a query placement replaces the parameter's placeholder value only") {
  auto s = header_secret();
  s.placement = {};
  s.placement.type = secrets::placement::kind::query;
  s.placement.query = "api_key";
  s.value = "v a/l&ue";
  auto head = parse("GET /search?q=" + placeholder + "&api_key=" + placeholder + "&x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  auto out = intercepted_request_head(head, "api.example.com", "api.example.com", {s});
  CHECK(out.injected == std::vector<std::string>{"openai"});
  CHECK(out.head.starts_with("GET /search?q=" + placeholder + "&api_key=v%20a%2Fl%26ue&x=1 HTTP/1.1\r\n"));
  auto other = parse("GET /search?key=" + placeholder + " HTTP/1.1\r\nHost: a\r\n\r\n");
  CHECK(intercepted_request_head(other, "api.example.com", "api.example.com", {s}).injected.empty());
}

TEST_CASE("a basic_auth placement replaces the password that is the placeholder") {
  auto s = header_secret();
  s.placement = {};
  s.placement.type = secrets::placement::kind::basic_auth;
  s.placement.username = "deploy";
  auto head = parse("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Basic " + base64_encode("anyone:" + placeholder) +
                    "\r\n\r\n");
  auto out = intercepted_request_head(head, "api.example.com", "api.example.com", {s});
  CHECK(out.injected.size() == 1);
  CHECK(out.head.find("Authorization: Basic " + base64_encode("deploy:" + value) + "\r\n") != std::string::npos);
  // An echo of the header has the encoded credential taken out too.
  auto r = response_replacements({s}, "api.example.com");
  CHECK(replace_values("got Basic " + base64_encode("deploy:" + value), r) ==
        "got Basic " + base64_encode("deploy:" + placeholder));
  auto wrong = parse("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Basic " + base64_encode("deploy:guess") + "\r\n\r\n");
  CHECK(intercepted_request_head(wrong, "api.example.com", "api.example.com", {s}).injected.empty());
}

TEST_CASE("answers have the value replaced by the placeholder, however the body is cut") {
  replacements r = response_replacements({header_secret()}, "api.example.com");
  REQUIRE(r.size() == 1);
  CHECK(response_replacements({header_secret()}, "evil.test").empty());
  CHECK(replace_values("echo: Bearer " + value + " and " + value + "!", r) ==
        "echo: Bearer " + placeholder + " and " + placeholder + "!");
  const std::string body = "{\"auth\": \"Bearer " + value + "\", \"again\": \"" + value + value + "\"}";
  const std::string expected = replace_values(body, r);
  CHECK(expected.find(value) == std::string::npos);
  for (std::size_t cut = 1; cut <= body.size(); ++cut) {
    stream_rewriter w(r);
    std::string out;
    for (std::size_t at = 0; at < body.size(); at += cut) out += w.feed(std::string_view(body).substr(at, cut));
    out += w.finish();
    CHECK(out == expected);
  }
}

TEST_CASE("percent encoding keeps unreserved characters only") {
  CHECK(percent_encode("aZ09-._~") == "aZ09-._~");
  CHECK(percent_encode("a b+/=&\xff") == "a%20b%2B%2F%3D%26%FF");
}
