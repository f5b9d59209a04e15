// The route table (pattern matching, 404 vs 405) and the target helpers (query, percent-decoding).

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "sandfort/http/router.hpp"
#include "support/run_coroutine.hpp"

using namespace sandfort;
using namespace sandfort::http;
using nlohmann::json;
namespace asio = boost::asio;

namespace {

using params_t = std::map<std::string, std::string>;

handler answer(std::string tag) {
  return [tag](context& ctx) -> asio::awaitable<response> {
    json body = {{"tag", tag}, {"params", ctx.params}};
    co_return json_response(200, body);
  };
}

router sample_router() {
  router r;
  r.add({{verb::get, "/v1/sandboxes", answer("list")},
         {verb::post, "/v1/sandboxes", answer("create")},
         {verb::get, "/v1/sandboxes/{id}", answer("get")},
         {verb::post, "/v1/sandboxes/{id}/stop", answer("stop")},
         {verb::get, "/v1/sandboxes/{id}/files/{name}", answer("file")}});
  return r;
}

response dispatch(const router& r, verb method, const std::string& target, const std::string& request_id) {
  context ctx;
  ctx.req = request{method, target, 11};
  ctx.request_id = request_id;
  split_target(target, ctx.path, ctx.query);
  return testing::run_coroutine(r.dispatch(ctx), std::chrono::seconds(10));
}

}  // namespace

TEST_CASE("http: match_pattern captures one segment per placeholder", "[http][router]") {
  params_t p;
  REQUIRE(match_pattern("/v1/sandboxes/{id}", "/v1/sandboxes/sbx-0123", p));
  CHECK(p == params_t{{"id", "sbx-0123"}});

  REQUIRE(match_pattern("/v1/sandboxes/{id}/files/{name}", "/v1/sandboxes/a/files/b", p));
  CHECK(p == params_t{{"id", "a"}, {"name", "b"}});

  // Literal routes capture nothing.
  REQUIRE(match_pattern("/v1/sandboxes", "/v1/sandboxes", p));
  CHECK(p.empty());
}

TEST_CASE("http: match_pattern percent-decodes captured segments", "[http][router]") {
  params_t p;
  REQUIRE(match_pattern("/v1/sandboxes/{id}", "/v1/sandboxes/my%20box", p));
  CHECK(p.at("id") == "my box");
  // An encoded slash stays inside its one segment.
  REQUIRE(match_pattern("/v1/sandboxes/{id}", "/v1/sandboxes/a%2Fb", p));
  CHECK(p.at("id") == "a/b");
}

TEST_CASE("http: match_pattern ignores a trailing slash", "[http][router]") {
  params_t p;
  CHECK(match_pattern("/v1/sandboxes", "/v1/sandboxes/", p));
  REQUIRE(match_pattern("/v1/sandboxes/{id}", "/v1/sandboxes/x/", p));
  CHECK(p.at("id") == "x");
}

TEST_CASE("http: match_pattern rejects extra and missing segments", "[http][router]") {
  params_t p{{"keep", "me"}};
  CHECK_FALSE(match_pattern("/v1/sandboxes/{id}", "/v1/sandboxes/x/stop", p));
  CHECK_FALSE(match_pattern("/v1/sandboxes/{id}", "/v1/sandboxes", p));
  CHECK_FALSE(match_pattern("/v1/sandboxes/{id}", "/v1/sandboxes/", p));  // {id} needs a non-empty segment
  CHECK_FALSE(match_pattern("/v1/sandboxes/{id}/stop", "/v1/sandboxes/stop", p));
  // A failed match leaves params alone.
  CHECK(p == params_t{{"keep", "me"}});
}

TEST_CASE("http: match_pattern rejects a literal mismatch", "[http][router]") {
  params_t p;
  CHECK_FALSE(match_pattern("/v1/sandboxes/{id}/stop", "/v1/sandboxes/x/start", p));
  CHECK_FALSE(match_pattern("/v1/sandboxes", "/v2/sandboxes", p));
  CHECK_FALSE(match_pattern("/v1/sandboxes", "/v1/Sandboxes", p));  // case-sensitive
}

TEST_CASE("http: router match tells 404 from 405", "[http][router]") {
  auto r = sample_router();
  params_t p;
  auto found = r.match(verb::post, "/v1/sandboxes/abc/stop", p);
  REQUIRE(found.found != nullptr);
  CHECK(found.found->pattern == "/v1/sandboxes/{id}/stop");
  CHECK(p.at("id") == "abc");

  auto wrong_verb = r.match(verb::delete_, "/v1/sandboxes/abc/stop", p);
  CHECK(wrong_verb.found == nullptr);
  CHECK(wrong_verb.status == 405);

  auto no_path = r.match(verb::get, "/v1/nothing", p);
  CHECK(no_path.found == nullptr);
  CHECK(no_path.status == 404);

  // The same path under two verbs goes to the right one.
  auto create = r.match(verb::post, "/v1/sandboxes", p);
  REQUIRE(create.found != nullptr);
  CHECK(create.found->method == verb::post);
}

TEST_CASE("http: router dispatch calls the matched handler with params", "[http][router]") {
  auto r = sample_router();
  auto res = dispatch(r, verb::get, "/v1/sandboxes/sbx-1/files/a%2Eb?x=1", "req-1");
  CHECK(res.result_int() == 200);
  auto body = json::parse(res.body());
  CHECK(body["tag"] == "file");
  CHECK(body["params"]["id"] == "sbx-1");
  CHECK(body["params"]["name"] == "a.b");
}

TEST_CASE("http: router dispatch answers 404 in the error shape", "[http][router]") {
  auto r = sample_router();
  auto res = dispatch(r, verb::get, "/v1/unknown?x=1", "req-00000000000000aa");
  CHECK(res.result_int() == 404);
  CHECK(res[bhttp::field::content_type] == "application/json");
  auto body = json::parse(res.body());
  CHECK(body["error"]["code"] == "not_found");
  CHECK(body["error"]["request_id"] == "req-00000000000000aa");
  CHECK(body["error"]["message"].get<std::string>().find("/v1/unknown") != std::string::npos);
}

TEST_CASE("http: router dispatch answers 405 in the error shape", "[http][router]") {
  auto r = sample_router();
  auto res = dispatch(r, verb::put, "/v1/sandboxes/sbx-1", "req-00000000000000bb");
  CHECK(res.result_int() == 405);
  auto body = json::parse(res.body());
  CHECK(body["error"]["code"] == "invalid_argument");  // as docs/api.md says
  CHECK(body["error"]["request_id"] == "req-00000000000000bb");
  CHECK(body["error"]["message"].get<std::string>().find("method not allowed") != std::string::npos);
}

TEST_CASE("http: split_target parses and decodes the query", "[http][target]") {
  std::string path;
  std::map<std::string, std::string> q;
  split_target("/v1/sandboxes?a=1&b=%2F&c", path, q);
  CHECK(path == "/v1/sandboxes");
  CHECK(q == std::map<std::string, std::string>{{"a", "1"}, {"b", "/"}, {"c", ""}});
}

TEST_CASE("http: split_target treats plus as space and lets the last repeated key win", "[http][target]") {
  std::string path;
  std::map<std::string, std::string> q;
  split_target("/x?label=a+b&k=1&k=2&k=3&sp%20ace=v%2Bw", path, q);
  CHECK(path == "/x");
  CHECK(q.at("label") == "a b");
  CHECK(q.at("k") == "3");
  CHECK(q.at("sp ace") == "v+w");
  CHECK(q.size() == 3);
}

TEST_CASE("http: split_target without a query or with empty pieces", "[http][target]") {
  std::string path;
  std::map<std::string, std::string> q;
  split_target("/plain/path", path, q);
  CHECK(path == "/plain/path");
  CHECK(q.empty());

  split_target("/p?", path, q);
  CHECK(path == "/p");
  CHECK(q.empty());

  split_target("/p?&&=nokey&a=&&b=2&", path, q);
  CHECK(path == "/p");
  CHECK(q == std::map<std::string, std::string>{{"a", ""}, {"b", "2"}});

  // Only the first '=' splits; the value keeps the rest.
  split_target("/p?expr=a=b", path, q);
  CHECK(q.at("expr") == "a=b");
}

TEST_CASE("http: percent_decode decodes valid escapes", "[http][target]") {
  CHECK(percent_decode("a%20b") == "a b");
  CHECK(percent_decode("%41%42%43") == "ABC");
  CHECK(percent_decode("%2f%2F") == "//");
  CHECK(percent_decode("x%00y") == std::string("x\0y", 3));
  CHECK(percent_decode("%ff") == "\xff");
  CHECK(percent_decode("a+b") == "a b");
  CHECK(percent_decode("") == "");
}

TEST_CASE("http: percent_decode leaves broken escapes alone", "[http][target]") {
  CHECK(percent_decode("%") == "%");
  CHECK(percent_decode("%4") == "%4");
  CHECK(percent_decode("abc%") == "abc%");
  CHECK(percent_decode("abc%4") == "abc%4");
  CHECK(percent_decode("%zz") == "%zz");
  CHECK(percent_decode("%4g") == "%4g");
  CHECK(percent_decode("%%41") == "%A");
  CHECK(percent_decode("100%") == "100%");
}
