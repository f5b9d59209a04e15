#include <catch2/catch.hpp>
#include <set>

#include "sandfort/core/ids.hpp"

using namespace sandfort;

TEST_CASE("ids are prefix plus 16 lowercase hex and do not repeat") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto id = new_id("sbx-");
    CHECK(is_id(id, "sbx-"));
    seen.insert(id);
  }
  CHECK(seen.size() == 1000);
}

TEST_CASE("is_id rejects near misses") {
  CHECK_FALSE(is_id("sbx-0123456789abcde", "sbx-"));     // 15 hex
  CHECK_FALSE(is_id("sbx-0123456789abcdef0", "sbx-"));   // 17 hex
  CHECK_FALSE(is_id("sbx-0123456789ABCDEF", "sbx-"));    // upper case
  CHECK_FALSE(is_id("key-0123456789abcdef", "sbx-"));
  CHECK(is_id("sbx-0123456789abcdef", "sbx-"));
}

TEST_CASE("to_hex encodes every byte") {
  CHECK(to_hex(std::string("\x00\xff\x10", 3)) == "00ff10");
}

TEST_CASE("from_hex reads what to_hex wrote, in either case, and nothing else") {
  const std::string bytes("\x00\xff\x10\xab", 4);
  CHECK(from_hex(to_hex(bytes)) == bytes);
  CHECK(from_hex("00FF10AB") == bytes);
  CHECK(from_hex("") == std::string());
  CHECK_FALSE(from_hex("abc"));   // odd length
  CHECK_FALSE(from_hex("0g"));    // not a digit
  CHECK_FALSE(from_hex("0 "));
}
