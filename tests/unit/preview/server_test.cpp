// The preview listener over real sockets on 127.0.0.1: routing by Host, the token in its three
// forms, what the application receives, our own short pages, and large bodies both ways.

#include <catch2/catch.hpp>

#include <boost/asio/this_coro.hpp>

#include "sandfort/preview/address.hpp"
#include "support.hpp"
#include "support/run_coroutine.hpp"

using namespace sandfort;
using namespace sandfort::preview;
using namespace sandfort::preview::test;
using namespace std::chrono_literals;
using bhttp::verb;

namespace {

// A port on 127.0.0.1 with nothing listening: bound, then released.
unsigned short closed_port() {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
  unsigned short port = acceptor.local_endpoint().port();
  acceptor.close();
  return port;
}

bool has_header_named(const reply& echoed, const std::string& name) {
  for (const auto& [key, value] : seen_headers(echoed))
    if (beast::iequals(key, name)) return true;
  return false;
}

bool is_short_text_page(const reply& r) {
  return r[bhttp::field::content_type].starts_with("text/plain") && r.body().size() < 200 &&
         r.body().find('{') == std::string::npos;
}

}  // namespace

TEST_CASE("preview: a token in the header reaches the app, which never sees our credentials", "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a));
  auto req = request(verb::get, "/hello?x=1", env.app_host(sandbox_a));
  req.set("X-Sandfort-Preview-Token", token_for(env, sandbox_a));
  // The console's session, on a deployment that would put previews on its host: never the app's.
  req.set(bhttp::field::cookie, "theme=dark; sandfort_preview_token=" + token_for(env, sandbox_a) +
                                    "; sandfort_session=c0ffee; session=s1; __Host-sandfort_session=c0ffee");
  req.set("X-Forwarded-For", "203.0.113.7");
  auto res = fetch(env.preview_port(), std::move(req));
  REQUIRE(res);
  REQUIRE(res->result_int() == 200);
  auto seen = nlohmann::json::parse(res->body());
  CHECK(seen["target"] == "/hello?x=1");
  CHECK_FALSE(has_header_named(*res, "X-Sandfort-Preview-Token"));
  CHECK(seen_header(*res, "Cookie") == "theme=dark; session=s1");
  CHECK(seen_header(*res, "Host") == env.app_host(sandbox_a));
  CHECK(seen_header(*res, "X-Forwarded-Host") == env.app_host(sandbox_a));
  CHECK(seen_header(*res, "X-Forwarded-Proto") == "http");
  CHECK(seen_header(*res, "X-Forwarded-For") == "203.0.113.7, 127.0.0.1");
}

TEST_CASE("preview: ?sandfort_token= is answered by the app at once, with the cookie, which then suffices",
          "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a));
  std::string token = token_for(env, sandbox_a);
  auto res = fetch(env.preview_port(), request(verb::get, "/app?a=1&sandfort_token=" + token + "&b=2",
                                               env.app_host(sandbox_a)));
  REQUIRE(res);
  REQUIRE(res->result_int() == 200);
  CHECK(nlohmann::json::parse(res->body())["target"] == "/app?a=1&b=2");
  CHECK((*res)[bhttp::field::set_cookie] == "sandfort_preview_token=" + token + "; Path=/; HttpOnly; SameSite=Lax");
  CHECK((*res)["Referrer-Policy"] == "no-referrer");
  CHECK((*res)[bhttp::field::cache_control] == "no-store");

  auto follow = request(verb::get, "/app?a=1&b=2", env.app_host(sandbox_a));
  follow.set(bhttp::field::cookie, "sandfort_preview_token=" + token);
  // A page opened from the link names it as Referer when a browser ignores the policy.
  follow.set(bhttp::field::referer, "http://" + env.app_host(sandbox_a) + "/app?sandfort_token=" + token + "&a=1");
  auto followed = fetch(env.preview_port(), std::move(follow));
  REQUIRE(followed);
  REQUIRE(followed->result_int() == 200);
  CHECK(nlohmann::json::parse(followed->body())["target"] == "/app?a=1&b=2");
  CHECK_FALSE(has_header_named(*followed, "Cookie"));  // it was the only cookie
  CHECK(seen_header(*followed, "Referer") == "http://" + env.app_host(sandbox_a) + "/app?a=1");
  // Answers to URLs without the token keep the app's own headers.
  CHECK(followed->find("Referrer-Policy") == followed->end());
  CHECK(followed->find(bhttp::field::set_cookie) == followed->end());
}

TEST_CASE("preview: a browser's top-level navigation with ?sandfort_token= is redirected to the clean URL",
          "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a));
  std::string token = token_for(env, sandbox_a);
  auto req = request(verb::get, "/app?a=1&sandfort_token=" + token + "&b=2", env.app_host(sandbox_a));
  req.set("Sec-Fetch-Mode", "navigate");
  req.set("Sec-Fetch-Dest", "document");
  auto res = fetch(env.preview_port(), std::move(req));
  REQUIRE(res);
  CHECK(res->result_int() == 302);
  CHECK((*res)[bhttp::field::location] == "/app?a=1&b=2");
  CHECK((*res)[bhttp::field::set_cookie] == "sandfort_preview_token=" + token + "; Path=/; HttpOnly; SameSite=Lax");
  CHECK((*res)["Referrer-Policy"] == "no-referrer");
  CHECK(is_short_text_page(*res));

  // A frame's navigation is answered at once: its cookie might be refused.
  auto framed = request(verb::get, "/app?sandfort_token=" + token, env.app_host(sandbox_a));
  framed.set("Sec-Fetch-Mode", "navigate");
  framed.set("Sec-Fetch-Dest", "iframe");
  auto answered = fetch(env.preview_port(), std::move(framed));
  REQUIRE(answered);
  CHECK(answered->result_int() == 200);
}

TEST_CASE("preview: the redirect never leaves the host, whatever the path", "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a));
  auto req = request(verb::get, "//evil.test/x?sandfort_token=" + token_for(env, sandbox_a), env.app_host(sandbox_a));
  req.set("Sec-Fetch-Mode", "navigate");
  req.set("Sec-Fetch-Dest", "document");
  auto res = fetch(env.preview_port(), std::move(req));
  REQUIRE(res);
  CHECK(res->result_int() == 302);
  CHECK((*res)[bhttp::field::location] == "/.//evil.test/x");
}

TEST_CASE("preview: a POST with ?sandfort_token= is forwarded without the parameter, body and all",
          "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a));
  auto req = request(verb::post, "/form?sandfort_token=" + token_for(env, sandbox_a) + "&k=v", env.app_host(sandbox_a));
  req.body() = "hello";
  auto res = fetch(env.preview_port(), std::move(req));
  REQUIRE(res);
  REQUIRE(res->result_int() == 200);
  auto seen = nlohmann::json::parse(res->body());
  CHECK(seen["target"] == "/form?k=v");
  CHECK(seen["body_size"] == 5);
}

TEST_CASE("preview: a missing or wrong token is 401", "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a));
  std::string host = env.app_host(sandbox_a);
  std::string other_port_token = make_token("a-sandbox-key", sandbox_a, static_cast<unsigned short>(env.app_port() + 1));

  auto none = fetch(env.preview_port(), request(verb::get, "/", host));
  auto wrong_header = request(verb::get, "/", host);
  wrong_header.set("X-Sandfort-Preview-Token", other_port_token);
  auto wrong_cookie = request(verb::get, "/", host);
  wrong_cookie.set(bhttp::field::cookie, "sandfort_preview_token=" + std::string(64, '0'));
  auto wrong_query = request(verb::get, "/?sandfort_token=nope", host);
  auto other_sandbox = request(verb::get, "/", host);
  other_sandbox.set("X-Sandfort-Preview-Token", make_token("a-sandbox-key", sandbox_b, env.app_port()));

  for (auto* req : {&wrong_header, &wrong_cookie, &wrong_query, &other_sandbox}) {
    auto res = fetch(env.preview_port(), std::move(*req));
    REQUIRE(res);
    CHECK(res->result_int() == 401);
    CHECK(res->find(bhttp::field::set_cookie) == res->end());
  }
  REQUIRE(none);
  CHECK(none->result_int() == 401);
  CHECK(is_short_text_page(*none));
}

TEST_CASE("preview: a sandbox with no key accepts no token", "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a, ""));
  auto req = request(verb::get, "/", env.app_host(sandbox_a));
  req.set("X-Sandfort-Preview-Token", make_token("", sandbox_a, env.app_port()));
  auto res = fetch(env.preview_port(), std::move(req));
  REQUIRE(res);
  CHECK(res->result_int() == 401);
}

TEST_CASE("preview: a public preview needs no token", "[preview][server]") {
  environment env;
  auto open = started(sandbox_a);
  open.public_preview = true;
  env.directory().put(open);
  auto res = fetch(env.preview_port(), request(verb::get, "/open", env.app_host(sandbox_a)));
  REQUIRE(res);
  CHECK(res->result_int() == 200);
  CHECK(nlohmann::json::parse(res->body())["target"] == "/open");
}

TEST_CASE("preview: bad hosts are 400, unknown sandboxes 404, sandboxes not started 503", "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a));
  auto stopped = started(sandbox_b);
  stopped.state = "stopped";
  env.directory().put(stopped);
  std::string listener = ":" + std::to_string(env.preview_port());
  std::string token = token_for(env, sandbox_a);

  struct row {
    std::string host;
    unsigned status;
  };
  const row rows[] = {
      {"localhost" + listener, 400},
      {"127.0.0.1" + listener, 400},
      {std::to_string(env.app_port()) + "-" + sandbox_a + ".elsewhere.test" + listener, 400},
      {"0-" + sandbox_a + ".preview.localhost" + listener, 400},
      {"65536-" + sandbox_a + ".preview.localhost" + listener, 400},
      {"abc-" + sandbox_a + ".preview.localhost" + listener, 400},
      {"80-sbx-not-an-id.preview.localhost" + listener, 400},
      {env.app_host("sbx-00000000000000cc"), 404},
      {env.app_host(sandbox_b), 503},
  };
  for (const auto& r : rows) {
    INFO(r.host);
    auto req = request(verb::get, "/", r.host);
    req.set("X-Sandfort-Preview-Token", token);
    auto res = fetch(env.preview_port(), std::move(req));
    REQUIRE(res);
    CHECK(res->result_int() == r.status);
    CHECK(is_short_text_page(*res));
  }

  // No Host at all (HTTP/1.0), and a target that is not a path.
  bhttp::request<bhttp::string_body> old{verb::get, "/", 10};
  auto no_host = fetch(env.preview_port(), std::move(old));
  REQUIRE(no_host);
  CHECK(no_host->result_int() == 400);
  auto absolute = request(verb::get, "http://elsewhere.test/", env.app_host(sandbox_a));
  absolute.set("X-Sandfort-Preview-Token", token);
  auto absolute_res = fetch(env.preview_port(), std::move(absolute));
  REQUIRE(absolute_res);
  CHECK(absolute_res->result_int() == 400);
}

TEST_CASE("preview: a port with nothing listening is 502, and so is one that hangs up", "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a));
  unsigned short nothing = closed_port();
  auto req = request(verb::get, "/", env.host(sandbox_a, nothing));
  req.set("X-Sandfort-Preview-Token", make_token("a-sandbox-key", sandbox_a, nothing));
  auto res = fetch(env.preview_port(), std::move(req));
  REQUIRE(res);
  CHECK(res->result_int() == 502);
  CHECK(is_short_text_page(*res));
  CHECK(res->body().find(std::to_string(nothing)) != std::string::npos);

  auto hang_up = request(verb::get, "/hang-up", env.app_host(sandbox_a));
  hang_up.set("X-Sandfort-Preview-Token", token_for(env, sandbox_a));
  auto silent = fetch(env.preview_port(), std::move(hang_up));
  REQUIRE(silent);
  CHECK(silent->result_int() == 502);
  CHECK(is_short_text_page(*silent));
}

TEST_CASE("preview: each request on a kept-alive connection is checked on its own", "[preview][server]") {
  environment env;
  env.directory().put(started(sandbox_a));
  env.directory().put(started(sandbox_b));
  std::string token_a = token_for(env, sandbox_a);
  auto statuses = testing::run_coroutine([&]() -> asio::awaitable<std::vector<unsigned>> {
    client c(co_await asio::this_coro::executor);
    std::vector<unsigned> out;
    if (!co_await c.connect(env.preview_port())) co_return out;
    const std::string hosts[] = {env.app_host(sandbox_a), env.app_host(sandbox_b), env.app_host(sandbox_a)};
    for (const auto& host : hosts) {
      auto req = request(verb::get, "/", host);
      req.set("X-Sandfort-Preview-Token", token_a);
      auto res = co_await c.send(std::move(req));
      if (!res) break;
      out.push_back(res->result_int());
    }
    co_return out;
  }());
  CHECK(statuses == std::vector<unsigned>{200, 401, 200});
}

TEST_CASE("preview: a 20 MiB request body reaches the app whole", "[preview][server][large]") {
  environment env;
  env.directory().put(started(sandbox_a));
  std::string body(20u << 20, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>((i * 7 + i / 4096) & 0xff);
  auto req = request(verb::put, "/upload", env.app_host(sandbox_a));
  req.set("X-Sandfort-Preview-Token", token_for(env, sandbox_a));
  req.body() = body;
  auto res = fetch(env.preview_port(), std::move(req));
  REQUIRE(res);
  REQUIRE(res->result_int() == 200);
  auto seen = nlohmann::json::parse(res->body());
  CHECK(seen["body_size"] == body.size());
  CHECK(seen["body_sum"] == checksum(0, body.data(), body.size()));
}

TEST_CASE("preview: a 20 MiB chunked answer reaches the client whole", "[preview][server][large]") {
  environment env;
  env.directory().put(started(sandbox_a));
  std::size_t size = 20u << 20;
  auto req = request(verb::get, "/large?bytes=" + std::to_string(size), env.app_host(sandbox_a));
  req.set("X-Sandfort-Preview-Token", token_for(env, sandbox_a));
  auto res = fetch(env.preview_port(), std::move(req));
  REQUIRE(res);
  REQUIRE(res->result_int() == 200);
  CHECK(res->chunked());
  REQUIRE(res->body().size() == size);
  bool intact = true;
  for (std::size_t i = 0; i < size && intact; ++i) intact = res->body()[i] == pattern_byte(i);
  CHECK(intact);
}

TEST_CASE("preview: stop closes the listener", "[preview][server]") {
  environment env;
  env.on_server_thread([&] { env.preview().stop(); });
  auto res = fetch(env.preview_port(), request(verb::get, "/", env.app_host(sandbox_a)));
  CHECK_FALSE(res);
}

// Issue 9: a sandbox whose container left the network (or died) has no address in its row; the
// preview answers itself rather than relay anywhere.
TEST_CASE("preview: a started sandbox without an address is 503, never relayed", "[preview][server]") {
  environment env;
  auto adrift = started(sandbox_a);
  adrift.public_preview = true;
  adrift.address.clear();
  env.directory().put(adrift);
  auto res = fetch(env.preview_port(), request(verb::get, "/", env.app_host(sandbox_a)));
  REQUIRE(res);
  CHECK(res->result_int() == 503);
  CHECK(is_short_text_page(*res));
}
