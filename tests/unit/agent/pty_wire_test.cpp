// The PTY's query and control messages, without a terminal or a socket.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "pty/wire.hpp"

using namespace sandfort;
using namespace sandfort::agent::pty;
using nlohmann::json;

TEST_CASE("the PTY query gives the size, the command and the cwd") {
  SECTION("defaults: 80x24, the default shell, the agent's cwd") {
    auto spec = parse_query({});
    REQUIRE(spec.ok());
    CHECK(spec->size.cols == 80);
    CHECK(spec->size.rows == 24);
    CHECK(spec->argv.empty());
    CHECK(spec->cwd.empty());
  }
  SECTION("everything given") {
    auto spec = parse_query({{"cols", "120"}, {"rows", "40"}, {"command", "top -d 1"}, {"cwd", "/work"}});
    REQUIRE(spec.ok());
    CHECK(spec->size.cols == 120);
    CHECK(spec->size.rows == 40);
    CHECK(spec->argv == std::vector<std::string>{"/bin/sh", "-c", "top -d 1"});
    CHECK(spec->cwd == "/work");
  }
  SECTION("an empty command means the default shell") {
    auto spec = parse_query({{"command", ""}});
    REQUIRE(spec.ok());
    CHECK(spec->argv.empty());
  }
  SECTION("sizes outside 1..1000 or not integers are refused, naming the parameter") {
    for (const char* bad : {"0", "1001", "-1", "12x", "", " 80", "99999999999"}) {
      INFO("cols=" << bad);
      auto spec = parse_query({{"cols", bad}});
      REQUIRE_FALSE(spec.ok());
      CHECK(spec.err().code == errc::invalid_argument);
      CHECK(spec.err().message.find("cols") != std::string::npos);
    }
    auto rows = parse_query({{"rows", "1001"}});
    REQUIRE_FALSE(rows.ok());
    CHECK(rows.err().message.find("rows") != std::string::npos);
    CHECK(parse_query({{"cols", "1"}, {"rows", "1000"}}).ok());
  }
  SECTION("NUL bytes are refused") {
    CHECK_FALSE(parse_query({{"command", std::string("a\0b", 3)}}).ok());
    CHECK_FALSE(parse_query({{"cwd", std::string("/a\0", 3)}}).ok());
  }
}

TEST_CASE("control messages from the client") {
  SECTION("resize") {
    auto r = parse_control(R"({"type":"resize","cols":100,"rows":30})");
    REQUIRE(r.ok());
    CHECK(r->size.cols == 100);
    CHECK(r->size.rows == 30);
  }
  SECTION("malformed ones are errors with a reason") {
    for (const char* bad : {"", "resize", "[]", "{}", R"({"type":1})", R"({"type":"bogus"})",
                            R"({"type":"resize","cols":100})", R"({"type":"resize","cols":"100","rows":30})",
                            R"({"type":"resize","cols":0,"rows":30})", R"({"type":"resize","cols":100,"rows":1001})",
                            R"({"type":"resize","cols":1.5,"rows":30})"}) {
      INFO("message: " << bad);
      auto r = parse_control(bad);
      REQUIRE_FALSE(r.ok());
      CHECK(r.err().code == errc::invalid_argument);
      CHECK_FALSE(r.err().message.empty());
    }
  }
}

TEST_CASE("control messages to the client") {
  CHECK(json::parse(exit_message(5)) == json{{"type", "exit"}, {"exit_code", 5}});
  CHECK(json::parse(error_message("no \xff")) == json{{"type", "error"}, {"message", "no \xef\xbf\xbd"}});
}
