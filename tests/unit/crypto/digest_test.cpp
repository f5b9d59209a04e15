#include "sandfort/crypto/digest.hpp"

#include <catch2/catch.hpp>

using namespace sandfort;

TEST_CASE("sha256_hex matches the FIPS 180-2 vector") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("hmac_sha256_hex matches RFC 4231 test case 2") {
  CHECK(hmac_sha256_hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("constant_time_equal compares whole strings") {
  CHECK(constant_time_equal("abc", "abc"));
  CHECK_FALSE(constant_time_equal("abc", "abd"));
  CHECK_FALSE(constant_time_equal("abc", "abcd"));
  CHECK(constant_time_equal("", ""));
}
