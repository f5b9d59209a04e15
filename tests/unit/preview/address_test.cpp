// Preview host names, tokens, URLs, and taking our credentials out of a request: pure functions.

#include <catch2/catch.hpp>

#include "sandfort/crypto/digest.hpp"
#include "sandfort/preview/address.hpp"
#include "sandfort/preview/request.hpp"

using namespace sandfort;
using namespace sandfort::preview;

namespace {
const std::string id = "sbx-0123456789abcdef";
const std::string domain = "preview.localhost";
}  // namespace

TEST_CASE("preview: parse_host reads port and sandbox from well-formed hosts", "[preview][host]") {
  struct row {
    std::string host;
    std::string domain;
    unsigned short port;
  };
  const row rows[] = {
      {"8080-sbx-0123456789abcdef.preview.localhost", domain, 8080},
      {"8080-sbx-0123456789abcdef.preview.localhost:8081", domain, 8080},
      {"8080-SBX-0123456789ABCDEF.Preview.LOCALHOST:8081", domain, 8080},
      {"8080-sbx-0123456789abcdef.preview.localhost.", domain, 8080},
      {"8080-sbx-0123456789abcdef.preview.localhost.:8081", domain, 8080},
      {"1-sbx-0123456789abcdef.preview.localhost", domain, 1},
      {"65535-sbx-0123456789abcdef.preview.localhost", domain, 65535},
      {"3000-sbx-0123456789abcdef.preview.localhost", "PREVIEW.localhost.", 3000},
      {"3000-sbx-0123456789abcdef.example.com:80", "example.com", 3000},
  };
  for (const auto& r : rows) {
    INFO(r.host << " in " << r.domain);
    auto parsed = parse_host(r.host, r.domain);
    REQUIRE(parsed);
    CHECK(parsed->port == r.port);
    CHECK(parsed->sandbox_id == id);
  }
}

TEST_CASE("preview: parse_host refuses what is not a preview host", "[preview][host]") {
  const std::string rejected[] = {
      "",
      "preview.localhost",
      ".preview.localhost",
      "8080-sbx-0123456789abcdef.other.localhost",
      "8080-sbx-0123456789abcdef.evilpreview.localhost",     // ends like the domain, another name
      "8080-sbx-0123456789abcdef.preview.localhost.evil",
      "0-sbx-0123456789abcdef.preview.localhost",
      "65536-sbx-0123456789abcdef.preview.localhost",
      "99999999-sbx-0123456789abcdef.preview.localhost",
      "abc-sbx-0123456789abcdef.preview.localhost",
      "08080-sbx-0123456789abcdef.preview.localhost",        // one spelling per port
      "-sbx-0123456789abcdef.preview.localhost",
      "8080sbx-0123456789abcdef.preview.localhost",
      "8080-sbx-0123456789abcde.preview.localhost",          // 15 hex
      "8080-sbx-0123456789abcdef0.preview.localhost",        // 17 hex
      "8080-sbx-0123456789abcdeg.preview.localhost",         // not hex
      "8080-key-0123456789abcdef.preview.localhost",         // another kind of id
      "8080-sbx-0123456789abcdef.x.preview.localhost",       // extra label
      "x.8080-sbx-0123456789abcdef.preview.localhost",       // extra label in front
      "8080-sbx-0123456789abcdef.preview.localhost:",        // empty listener port
      "8080-sbx-0123456789abcdef.preview.localhost:abc",
      "8080-sbx-0123456789abcdef.preview.localhost:123456",
      "8080-sbx-0123456789abcdef.preview.localhost..",
      "[::1]:8081",
      "127.0.0.1:8081",
  };
  for (const auto& host : rejected) {
    INFO("'" << host << "'");
    CHECK_FALSE(parse_host(host, domain));
  }
  CHECK_FALSE(parse_host("8080-sbx-0123456789abcdef.preview.localhost", ""));
}

TEST_CASE("preview: make_token is stable and differs per port, sandbox and key", "[preview][token]") {
  std::string token = make_token("key-1", id, 8080);
  CHECK(token == make_token("key-1", id, 8080));
  CHECK(token == hmac_sha256_hex("key-1", id + ":8080"));
  CHECK(token.size() == 64);
  CHECK(token != make_token("key-1", id, 8081));
  CHECK(token != make_token("key-1", "sbx-0123456789abcdee", 8080));
  CHECK(token != make_token("key-2", id, 8080));
}

TEST_CASE("preview: url_template and url_for name the listener's port unless it is 80", "[preview][url]") {
  CHECK(url_template(domain, id, 8081) == "http://{port}-sbx-0123456789abcdef.preview.localhost:8081");
  CHECK(url_template("example.com", id, 80) == "http://{port}-sbx-0123456789abcdef.example.com");
  CHECK(url_for(domain, id, 3000, 8081) == "http://3000-sbx-0123456789abcdef.preview.localhost:8081");
  auto parsed = parse_host("3000-sbx-0123456789abcdef.preview.localhost:8081", domain);
  REQUIRE(parsed);
  CHECK(parsed->port == 3000);
}

TEST_CASE("preview: link_for gives every client a request target that starts with a slash", "[preview][url]") {
  const std::string url = "http://3000-sbx-0123456789abcdef.preview.localhost:8081";
  CHECK(link_for(url, "ab12") == url + "/?sandfort_token=ab12");
  CHECK(link_for(url + "/app/", "ab12") == url + "/app/?sandfort_token=ab12");
  CHECK(link_for(url + "?x=1", "ab12") == url + "/?x=1&sandfort_token=ab12");
  CHECK(link_for(url, "") == url);
}

TEST_CASE("preview: take_query_parameter removes the token and keeps the rest in order", "[preview][request]") {
  auto split = take_query_parameter("/app/page?a=1&sandfort_token=abc&b=x%20y&c", "sandfort_token");
  CHECK(split.target == "/app/page?a=1&b=x%20y&c");
  CHECK(split.value == "abc");

  split = take_query_parameter("/?sandfort_token=abc", "sandfort_token");
  CHECK(split.target == "/");
  CHECK(split.value == "abc");

  split = take_query_parameter("/p?sandfort_token=old&z=1&sandfort%5Ftoken=new", "sandfort_token");
  CHECK(split.target == "/p?z=1");
  CHECK(split.value == "new");

  split = take_query_parameter("/p?sandfort_tokenx=1&x=sandfort_token", "sandfort_token");
  CHECK(split.target == "/p?sandfort_tokenx=1&x=sandfort_token");
  CHECK_FALSE(split.value);

  split = take_query_parameter("/plain", "sandfort_token");
  CHECK(split.target == "/plain");
  CHECK_FALSE(split.value);
}
