// The response helpers every layer uses: JSON bodies and the API's error shape.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "sandfort/http/client.hpp"
#include "sandfort/http/message.hpp"

using namespace sandfort;
using namespace sandfort::http;
using nlohmann::json;

TEST_CASE("http: error_response maps each code to its status and the error shape", "[http][message]") {
  const std::vector<std::pair<errc, unsigned>> cases = {
      {errc::invalid_argument, 400}, {errc::unauthenticated, 401}, {errc::permission_denied, 403},
      {errc::not_found, 404},        {errc::conflict, 409},        {errc::payload_too_large, 413},
      {errc::quota_exceeded, 429},   {errc::rate_limited, 429},    {errc::internal, 500},
      {errc::unavailable, 503}};
  for (const auto& [code, status] : cases) {
    INFO("code " << to_string(code));
    auto res = error_response(make_error(code, "something about it"), "req-0123456789abcdef");
    CHECK(res.result_int() == status);
    CHECK(res[bhttp::field::content_type] == "application/json");
    auto body = json::parse(res.body());
    REQUIRE(body.is_object());
    CHECK(body.size() == 1);
    const auto& e = body.at("error");
    CHECK(e.size() == 3);
    CHECK(e.at("code") == std::string(to_string(code)));
    CHECK(e.at("message") == "something about it");
    CHECK(e.at("request_id") == "req-0123456789abcdef");
  }
}

TEST_CASE("http: json_response sets the status and a matching Content-Length", "[http][message]") {
  json body = {{"a", 1}, {"b", "two"}};
  auto res = json_response(201, body);
  CHECK(res.result_int() == 201);
  CHECK(res[bhttp::field::content_type] == "application/json");
  CHECK(json::parse(res.body()) == body);
  CHECK(res[bhttp::field::content_length] == std::to_string(res.body().size()));
}

TEST_CASE("http: json_response replaces invalid UTF-8 instead of throwing", "[http][message]") {
  json body = {{"stdout", std::string("ok \xff\xfe end")}, {"nested", {std::string("\xc3")}}};
  response res;
  REQUIRE_NOTHROW(res = json_response(200, body));
  CHECK(res.result_int() == 200);
  auto parsed = json::parse(res.body());
  CHECK(parsed["stdout"] == "ok \xEF\xBF\xBD\xEF\xBF\xBD end");  // U+FFFD for each bad byte
  CHECK(parsed["nested"][0] == "\xEF\xBF\xBD");
}

TEST_CASE("http: error_response survives invalid UTF-8 in the message", "[http][message]") {
  response res;
  REQUIRE_NOTHROW(res = error_response(make_error(errc::internal, "bad \xff byte"), "req-1"));
  CHECK(res.result_int() == 500);
  CHECK(json::parse(res.body())["error"]["message"] == "bad \xEF\xBF\xBD byte");
}

TEST_CASE("http: empty_response has no body and a zero length", "[http][message]") {
  auto res = empty_response(204);
  CHECK(res.result_int() == 204);
  CHECK(res.body().empty());
  auto ok = empty_response(200);
  CHECK(ok[bhttp::field::content_length] == "0");
}

TEST_CASE("http: make_request fills Host and a JSON body", "[http][message]") {
  // make_request lives in client.hpp but is pure: check it beside the other builders.
  json body = {{"x", 1}};
  auto req = make_request(verb::post, "/exec", &body);
  CHECK(req.method() == verb::post);
  CHECK(req.target() == "/exec");
  CHECK(req[bhttp::field::host] == "localhost");
  CHECK(req[bhttp::field::content_type] == "application/json");
  CHECK(json::parse(req.body()) == body);
  CHECK(req[bhttp::field::content_length] == std::to_string(req.body().size()));
  auto bare = make_request(verb::get, "/health");
  CHECK(bare.body().empty());
}
