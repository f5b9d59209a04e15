// The console's CSRF rule (src/api/console_csrf.hpp): with its cookie, a request reads freely;
// changes and WebSockets must come from a page of this host, and changes carry the session's token.
#include <catch2/catch.hpp>

#include "console_csrf.hpp"

using namespace sandfort;

namespace {

http::bhttp::fields console_headers(std::initializer_list<std::pair<const char*, const char*>> pairs) {
  http::bhttp::fields h;
  for (const auto& [k, v] : pairs) h.set(k, v);
  return h;
}

const std::string csrf = "0123456789abcdef0123456789abcdef";

}  // namespace

TEST_CASE("console csrf: reads pass, changes need this host's Origin and the session's token", "[api][console]") {
  using http::verb;
  auto ok = [](verb m, const http::bhttp::fields& h) { return api::console_request_allowed(m, h, csrf).ok(); };
  CHECK(ok(verb::get, console_headers({})));
  CHECK(ok(verb::head, console_headers({{"Origin", "https://evil.example"}})));

  const auto from_console = console_headers({{"Host", "127.0.0.1:8080"}, {"Origin", "http://127.0.0.1:8080"},
                                             {"X-Sandfort-CSRF", csrf.c_str()}});
  for (verb m : {verb::post, verb::put, verb::patch, verb::delete_}) CHECK(ok(m, from_console));
  // Host names compare without case, as browsers may spell them either way.
  CHECK(ok(verb::post, console_headers({{"Host", "Console.Example:443"}, {"Origin", "https://console.example:443"},
                                        {"X-Sandfort-CSRF", csrf.c_str()}})));

  // A cross-site form post: no custom header, another Origin.
  CHECK_FALSE(ok(verb::post, console_headers({{"Host", "127.0.0.1:8080"}, {"Origin", "https://evil.example"}})));
  // A preview's page on the same site: its own origin, even with a token it guessed right.
  CHECK_FALSE(ok(verb::post, console_headers({{"Host", "api.example.com"}, {"Origin", "https://8080-sbx-0123456789abcdef.preview.example.com"},
                                              {"X-Sandfort-CSRF", csrf.c_str()}})));
  CHECK_FALSE(ok(verb::post, console_headers({{"Host", "127.0.0.1:8080"}, {"X-Sandfort-CSRF", csrf.c_str()}})));
  CHECK_FALSE(ok(verb::post, console_headers({{"Host", "127.0.0.1:8080"}, {"Origin", "null"},
                                              {"X-Sandfort-CSRF", csrf.c_str()}})));
  CHECK_FALSE(ok(verb::post, console_headers({{"Host", "127.0.0.1:8080"}, {"Origin", "http://127.0.0.1:8080/x"},
                                              {"X-Sandfort-CSRF", csrf.c_str()}})));
  CHECK_FALSE(ok(verb::post, console_headers({{"Host", "127.0.0.1:8080"}, {"Origin", "ftp://127.0.0.1:8080"},
                                              {"X-Sandfort-CSRF", csrf.c_str()}})));
  // The right Origin without the token, or with another.
  CHECK_FALSE(ok(verb::delete_, console_headers({{"Host", "127.0.0.1:8080"}, {"Origin", "http://127.0.0.1:8080"}})));
  CHECK_FALSE(ok(verb::delete_, console_headers({{"Host", "127.0.0.1:8080"}, {"Origin", "http://127.0.0.1:8080"},
                                                 {"X-Sandfort-CSRF", "0123456789abcdef0123456789abcdee"}})));
  CHECK_FALSE(api::console_request_allowed(verb::post, from_console, "").ok());
  auto refused = api::console_request_allowed(verb::post, console_headers({{"Host", "h"}, {"Origin", "http://h"}}), csrf);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::permission_denied);
  CHECK_THAT(refused.err().message, Catch::Contains("X-Sandfort-CSRF"));
}

TEST_CASE("console csrf: a WebSocket (a terminal) needs this host's Origin, no token", "[api][console]") {
  using http::verb;
  auto ws = [](const char* origin) {
    return api::console_request_allowed(
        verb::get, console_headers({{"Host", "127.0.0.1:8080"}, {"Upgrade", "websocket"}, {"Origin", origin}}), csrf);
  };
  CHECK(ws("http://127.0.0.1:8080"));
  CHECK_FALSE(ws("http://8080-sbx-0123456789abcdef.preview.localhost:8081"));
  CHECK_FALSE(ws(""));
}
