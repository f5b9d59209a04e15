#include <catch2/catch.hpp>

#include "url.hpp"

using namespace sandfort::docker::detail;

TEST_CASE("percent_encode keeps unreserved characters and encodes the rest") {
  CHECK(percent_encode("abcXYZ019-._~") == "abcXYZ019-._~");
  CHECK(percent_encode("a b&c=d/e?f#g%h+i") == "a%20b%26c%3Dd%2Fe%3Ff%23g%25h%2Bi");
  CHECK(percent_encode(R"({"label":["a=b"]})") == "%7B%22label%22%3A%5B%22a%3Db%22%5D%7D");
  CHECK(percent_encode("\xc3\xa9") == "%C3%A9");
  CHECK(percent_encode(std::string("a\0b", 3)) == "a%00b");
  CHECK(percent_encode("localhost:5000/x/y:1", "/:@") == "localhost:5000/x/y:1");
}

TEST_CASE("query_string encodes keys and values") {
  CHECK(query_string({}) == "");
  CHECK(query_string({{"all", "true"}}) == "?all=true");
  CHECK(query_string({{"fromImage", "localhost:5000/x"}, {"tag", "sha256:ab"}}) ==
        "?fromImage=localhost%3A5000%2Fx&tag=sha256%3Aab");
}
