// Reading a proxy request on values alone: the Basic credential and the request target.

#include <catch2/catch.hpp>

#include "sandfort/proxy/request.hpp"

using namespace sandfort;
using namespace sandfort::proxy;

TEST_CASE("proxy: parse_proxy_authorization reads Basic id:secret", "[proxy][request]") {
  // base64("sbx-1:s3cret") = c2J4LTE6czNjcmV0
  auto c = parse_proxy_authorization("Basic c2J4LTE6czNjcmV0");
  REQUIRE(c);
  CHECK(c->sandbox_id == "sbx-1");
  CHECK(c->secret == "s3cret");
  CHECK(parse_proxy_authorization("basic c2J4LTE6czNjcmV0"));
  CHECK(parse_proxy_authorization("BASIC   c2J4LTE6czNjcmV0  "));
  // The secret may hold ':' itself: only the first one separates. base64("a:b:c") = YTpiOmM=
  auto colon = parse_proxy_authorization("Basic YTpiOmM=");
  REQUIRE(colon);
  CHECK(colon->sandbox_id == "a");
  CHECK(colon->secret == "b:c");
  // one and two padding characters: base64("ab:cd") = YWI6Y2Q=, base64("ab:c") = YWI6Yw==
  CHECK(parse_proxy_authorization("Basic YWI6Y2Q=")->secret == "cd");
  CHECK(parse_proxy_authorization("Basic YWI6Yw==")->secret == "c");
}

TEST_CASE("proxy: parse_proxy_authorization refuses anything else", "[proxy][request]") {
  for (const char* bad : {
           "",
           "Basic",
           "Basic ",
           "Basicc2J4LTE6czNjcmV0",
           "Bearer c2J4LTE6czNjcmV0",
           "Digest username=\"x\"",
           "Basic c2J4LTE6czNjcmV0=",   // bad length
           "Basic c2J4LTE6czNjcmV",     // unpadded
           "Basic c2J4LTE6czNj!mV0",    // not the alphabet
           "Basic c2J4-TE6czNjcmV0",    // URL-safe alphabet
           "Basic c2J4LTE6 czNjcmV0",   // space inside
           "Basic YWI6Yx==",            // stray bits after the last byte
           "Basic ====",
           "Basic YWI=YWI6Yw==",        // padding in the middle
           "Basic c2J4LTE=",            // "sbx-1": no ':'
           "Basic OnNlY3JldA==",        // ":secret": empty id
           "Basic c2J4LTE6",            // "sbx-1:": empty secret
           "Basic c2J4DTE6czNjcmV0",    // a control character in the id
           "Basic c2J4LTE6czMKY3JldA==",  // "sbx-1:s3\ncret"
       }) {
    INFO(bad);
    CHECK_FALSE(parse_proxy_authorization(bad));
  }
  CHECK_FALSE(parse_proxy_authorization("Basic " + std::string(2000, 'A')));
}

TEST_CASE("proxy: CONNECT targets are host:port", "[proxy][request]") {
  auto t = parse_request_target(true, "Upstream.TEST.:443");
  REQUIRE(t.ok());
  CHECK(t->mode == egress_target::kind::tunnel);
  CHECK(t->host == "upstream.test");
  CHECK(t->where.port == 443);
  auto v6 = parse_request_target(true, "[::1]:22");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  for (const char* bad : {"upstream.test", "upstream.test:0", "upstream.test:65536", "upstream.test:abc",
                          "http://upstream.test:80", "/path", "*", "user@upstream.test:443", ".:443", ":443",
                          // Empty labels (found by tests/fuzz/fuzz_proxy_request: "api.test.." was normalized
                          // twice and matched an allowlist naming api.test).
                          "upstream.test..:443", ".upstream.test:443", "upstream..test:443"}) {
    INFO(bad);
    auto parsed = parse_request_target(true, bad);
    CHECK_FALSE(parsed.ok());
    if (!parsed.ok()) CHECK(parsed.err().code == errc::invalid_argument);
  }
}

TEST_CASE("proxy: absolute-form http targets become origin-form with a Host", "[proxy][request]") {
  auto t = parse_request_target(false, "http://Upstream.Test/a/b?q=1");
  REQUIRE(t.ok());
  CHECK(t->mode == egress_target::kind::forward);
  CHECK(t->host == "upstream.test");
  CHECK(t->where.port == 80);
  CHECK(t->origin_target == "/a/b?q=1");
  CHECK(t->host_header == "Upstream.Test");

  auto port = parse_request_target(false, "HTTP://upstream.test:8080");
  REQUIRE(port.ok());
  CHECK(port->where.port == 8080);
  CHECK(port->origin_target == "/");
  CHECK(port->host_header == "upstream.test:8080");

  auto query = parse_request_target(false, "http://upstream.test?x=1");
  REQUIRE(query.ok());
  CHECK(query->origin_target == "/?x=1");

  auto v6 = parse_request_target(false, "http://[::1]:81/x");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->host_header == "[::1]:81");
  CHECK(parse_request_target(false, "http://[::1]/")->where.port == 80);
}

TEST_CASE("proxy: other request targets are refused", "[proxy][request]") {
  for (const char* bad : {"/", "/path", "*", "https://upstream.test/", "ftp://upstream.test/", "upstream.test:80",
                          "http:/upstream.test/", "http://", "http:///path", "http://upstream.test:/",
                          "http://upstream.test:0/", "http://upstream.test:65536/", "http://upstream.test:abc/",
                          "http://user:pw@upstream.test/", "http://upstream.test/#frag", "http://up stream.test/",
                          "http://[::1/", "http://upstream.test:80:80/"}) {
    INFO(bad);
    auto parsed = parse_request_target(false, bad);
    CHECK_FALSE(parsed.ok());
    if (!parsed.ok()) CHECK(parsed.err().code == errc::invalid_argument);
  }
}
