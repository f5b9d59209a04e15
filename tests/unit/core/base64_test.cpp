#include <catch2/catch.hpp>

#include "sandfort/core/base64.hpp"

using namespace sandfort;

TEST_CASE("base64: RFC 4648 test vectors both ways") {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    CHECK(base64_encode(plain) == encoded);
    CHECK(base64_decode(encoded) == std::optional<std::string>(plain));
  }
  CHECK(base64_encode(std::string("\xff\xfe\x00", 3)) == "//4A");
  CHECK(base64url_decode("__4A") == std::optional<std::string>(std::string("\xff\xfe\x00", 3)));
  CHECK(base64url_decode("Zm9vYg") == std::optional<std::string>("foob"));
  CHECK(base64url_encode(std::string("\xff\xfe\x00", 3)) == "__4A");
  CHECK(base64url_encode("foob") == "Zm9vYg");
  CHECK(base64url_encode("") == "");
  for (const auto& [plain, encoded] : vectors) CHECK(base64url_decode(base64url_encode(plain)) == std::optional<std::string>(plain));
}

TEST_CASE("base64: one value, one encoding — everything else is refused") {
  for (const char* bad : {"Zg=", "Zg", "Zh==", "Zm9=", "Z===", "Zg==Zg==", "Zm 9v", "Zm9v\n", "-_8A", "Zm=v"})
    CHECK_FALSE(base64_decode(bad));
  for (const char* bad : {"Zg==", "Zh", "Zm9", "Z", "+/8A", "Zm9v Yg"}) CHECK_FALSE(base64url_decode(bad));
}
