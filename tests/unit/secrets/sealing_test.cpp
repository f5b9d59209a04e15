#include "sandfort/secrets/sealing.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "sandfort/core/base64.hpp"

using namespace sandfort;
using namespace sandfort::secrets;

namespace {

struct sealing_dir {
  std::string path;
  sealing_dir() {
    char tmpl[] = "/tmp/sf-sealing-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~sealing_dir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

// The sealed value with one byte of its decoded body flipped, encoded again.
std::string flip_byte(const std::string& sealed, std::size_t index) {
  auto raw = base64_decode(sealed.substr(3));
  REQUIRE(raw);
  (*raw)[index % raw->size()] = static_cast<char>((*raw)[index % raw->size()] ^ 0x01);
  return "v1." + base64_encode(*raw);
}

}  // namespace

TEST_CASE("a sealed value opens with its key and place, and never carries the value in the clear") {
  const auto key = sealing_key::generate();
  const std::string value = "sk-live-0123456789abcdef";
  const auto aad = value_aad("org-1", "openai");
  const auto sealed = key.seal(value, aad);
  CHECK(sealed.rfind("v1.", 0) == 0);
  CHECK(sealed.find(value) == std::string::npos);
  CHECK(sealed.find(base64_encode(value)) == std::string::npos);
  auto opened = key.open(sealed, aad);
  REQUIRE(opened);
  CHECK(*opened == value);
  // A fresh nonce each time: the same value seals differently.
  CHECK(key.seal(value, aad) != sealed);
  // The empty value round-trips too.
  CHECK(key.open(key.seal("", aad), aad).value() == "");
}

TEST_CASE("tampered, truncated, misplaced or foreign sealed values are refused") {
  const auto key = sealing_key::generate();
  const auto aad = value_aad("org-1", "openai");
  const auto sealed = key.seal("the value", aad);

  SECTION("any flipped byte: nonce, ciphertext or tag") {
    for (std::size_t i : {0u, 5u, 12u, 14u, 20u, 30u, 36u}) {
      auto r = key.open(flip_byte(sealed, i), aad);
      CHECK_FALSE(r);
      if (!r) CHECK(r.err().code == errc::invalid_argument);
    }
  }
  SECTION("truncated, or not a sealed value at all") {
    CHECK_FALSE(key.open(sealed.substr(0, sealed.size() - 4), aad));
    CHECK_FALSE(key.open("v1.", aad));
    CHECK_FALSE(key.open("v2." + sealed.substr(3), aad));
    CHECK_FALSE(key.open("the value", aad));
  }
  SECTION("another organization or another name") {
    CHECK_FALSE(key.open(sealed, value_aad("org-2", "openai")));
    CHECK_FALSE(key.open(sealed, value_aad("org-1", "openai2")));
    // The associated data is unambiguous: moving a character from org id to name changes it.
    CHECK(value_aad("org-1a", "b") != value_aad("org-1", "ab"));
    CHECK_FALSE(key.open(sealed, ca_key_aad("org-1")));
  }
  SECTION("another key") {
    const auto other = sealing_key::generate();
    CHECK_FALSE(other.open(sealed, aad));
    CHECK(other.key_id() != key.key_id());
  }
}

TEST_CASE("the key file is created 0600, read back the same, and refused when others may read it") {
  sealing_dir dir;
  const auto path = dir.file("secrets.key");
  const mode_t old_umask = ::umask(0);  // whatever the umask, the file is 0600
  auto made = sealing_key::load_or_create(path);
  ::umask(old_umask);
  REQUIRE(made);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);

  auto again = sealing_key::load_or_create(path);
  REQUIRE(again);
  CHECK(again->key_id() == made->key_id());
  const auto aad = value_aad("org-1", "x");
  CHECK(again->open(made->seal("v", aad), aad).value() == "v");

  SECTION("mode 0644 is refused with what to do") {
    REQUIRE(::chmod(path.c_str(), 0644) == 0);
    auto refused = sealing_key::load_or_create(path);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().code == errc::permission_denied);
    CHECK(refused.err().message.find("mode 0644") != std::string::npos);
    CHECK(refused.err().message.find("chmod 600 " + path) != std::string::npos);
  }
  SECTION("a file that is not a key is refused, not replaced") {
    { std::ofstream(path, std::ios::trunc) << "not a key\n"; }
    auto refused = sealing_key::load_or_create(path);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().code == errc::invalid_argument);
    CHECK(refused.err().message.find("64 hexadecimal") != std::string::npos);
  }
  SECTION("a symbolic link is not followed") {
    const auto link = dir.file("link.key");
    REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
    CHECK_FALSE(sealing_key::load_or_create(link));
  }
}

TEST_CASE("a key is 32 bytes") {
  CHECK_FALSE(sealing_key::from_bytes(std::string(31, 'k')));
  CHECK_FALSE(sealing_key::from_bytes(std::string(33, 'k')));
  auto k = sealing_key::from_bytes(std::string(32, 'k'));
  REQUIRE(k);
  const auto aad = value_aad("o", "n");
  CHECK(sealing_key::from_bytes(std::string(32, 'k'))->open(k->seal("same key", aad), aad).value() == "same key");
}
