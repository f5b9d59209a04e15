// The authorization code flow's pieces without I/O (auth/code_flow.hpp): PKCE's S256 against
// RFC 7636's own example, the encodings a provider reads, the Basic credentials of RFC 6749, and
// the callback's origin, which a Host header must not be able to bend.
#include <catch2/catch.hpp>

#include "sandfort/auth/code_flow.hpp"

using namespace sandfort;
using namespace sandfort::auth;

TEST_CASE("code flow: S256 is RFC 7636's example, and verifiers are 43 to 128 unreserved characters",
          "[auth][code_flow]") {
  // RFC 7636, appendix B.
  CHECK(code_flow::pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") ==
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
  CHECK(code_flow::is_code_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"));
  CHECK(code_flow::is_code_verifier(std::string(64, 'a')));  // what sandfortd makes: 32 random bytes in hex
  CHECK(code_flow::is_code_verifier(std::string(128, '~')));
  CHECK_FALSE(code_flow::is_code_verifier(std::string(42, 'a')));
  CHECK_FALSE(code_flow::is_code_verifier(std::string(129, 'a')));
  CHECK_FALSE(code_flow::is_code_verifier(std::string(42, 'a') + "+"));
  CHECK_FALSE(code_flow::is_code_verifier(std::string(42, 'a') + " "));
}

TEST_CASE("code flow: queries and token requests are form-encoded, the endpoint's own query kept",
          "[auth][code_flow]") {
  CHECK(code_flow::form_encode({}) == "");
  CHECK(code_flow::form_encode({{"scope", "openid email"}, {"redirect_uri", "http://h:1/a?b=c&d"}}) ==
        "scope=openid%20email&redirect_uri=http%3A%2F%2Fh%3A1%2Fa%3Fb%3Dc%26d");
  CHECK(code_flow::form_encode({{"state", "aZ09-._~"}, {"x", "é+"}}) == "state=aZ09-._~&x=%C3%A9%2B");
  CHECK(*code_flow::with_query("https://idp/auth", {{"a", "1"}, {"b", "2"}}) == "https://idp/auth?a=1&b=2");
  CHECK(*code_flow::with_query("https://idp/auth?tenant=x", {{"a", "1"}}) == "https://idp/auth?tenant=x&a=1");
  CHECK(*code_flow::with_query("https://idp/auth?", {{"a", "1"}}) == "https://idp/auth?a=1");
  CHECK(code_flow::with_query("https://idp/auth#frag", {{"a", "1"}}).err().code == errc::invalid_argument);
}

TEST_CASE("code flow: client credentials are form-encoded before Basic's base64 (RFC 6749 2.3.1)",
          "[auth][code_flow]") {
  CHECK(code_flow::basic_credentials("sandfort-console", "s3cret") == "Basic c2FuZGZvcnQtY29uc29sZTpzM2NyZXQ=");
  // A ':' in the id would split it wrongly unless encoded.
  CHECK(code_flow::basic_credentials("a:b", "c d") == "Basic YSUzQWI6YyUyMGQ=");
}

TEST_CASE("code flow: the callback's origin is console.public_url, else the Host as sent, if it is a host",
          "[auth][code_flow]") {
  CHECK(*code_flow::console_origin("https://sandfort.example.com", "evil.example", false) ==
        "https://sandfort.example.com");
  CHECK(*code_flow::console_origin("", "127.0.0.1:8080", false) == "http://127.0.0.1:8080");
  CHECK(*code_flow::console_origin("", "Sandfort.Example.com", true) == "https://sandfort.example.com");
  CHECK(*code_flow::console_origin("", "[::1]:8443", true) == "https://[::1]:8443");
  CHECK(*code_flow::console_origin("", "localhost", false) == "http://localhost");
  // Whatever could turn the redirect URI into another URL is refused: a path, user info, a
  // query, a fragment, spaces, a port that is not one, nothing at all.
  for (const char* bad : {"", "evil.example/x", "a@evil.example", "host?x=1", "host#x", "host name",
                                "host:80x", "host:", "host:123456", "[::1", "[]", ".host", "-host", "h\r\nX: y"}) {
    INFO(bad);
    CHECK(code_flow::console_origin("", bad, false).err().code == errc::invalid_argument);
  }
}

TEST_CASE("code flow: an issuer's key is stable and says nothing secret, its host labels it", "[auth][code_flow]") {
  const auto key = code_flow::issuer_key("https://idp.example.com/realms/eng");
  CHECK(key.size() == 16);
  CHECK(key == code_flow::issuer_key("https://idp.example.com/realms/eng"));
  CHECK(key != code_flow::issuer_key("https://idp.example.com/realms/eng/"));
  CHECK(code_flow::host_of("https://idp.example.com/realms/eng") == "idp.example.com");
  CHECK(code_flow::host_of("http://127.0.0.1:9400") == "127.0.0.1:9400");
}
