#include "sandfort/core/private_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

using namespace sandfort;

namespace {

struct scratch_dir {
  std::string path;
  scratch_dir() {
    char tmpl[] = "/tmp/sf-private-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~scratch_dir() { std::filesystem::remove_all(path); }
};

private_file key_at(const std::string& path, bool follow_links = false) {
  return {.path = path, .label = "test key file", .max_size = 64, .follow_links = follow_links};
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("a private file is created 0600 whatever the umask, once, and read back") {
  scratch_dir dir;
  const auto path = dir.path + "/k";
  CHECK(nothing_at(path));
  const mode_t old = ::umask(0277);  // would leave the owner unable to read a file it made
  auto made = install_private_file(key_at(path), "first");
  ::umask(old);
  REQUIRE(made);
  CHECK(*made);
  CHECK(mode_of(path) == 0600);
  CHECK_FALSE(nothing_at(path));
  auto again = install_private_file(key_at(path), "second");  // another start racing: the first wins
  REQUIRE(again);
  CHECK_FALSE(*again);
  CHECK(read_private_file(key_at(path)).value() == "first");
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), {}) == 1);  // no temporary left
}

TEST_CASE("a private file is refused when others may read it, when too large, or through a link") {
  scratch_dir dir;
  const auto path = dir.path + "/k";
  REQUIRE(install_private_file(key_at(path), "key"));

  SECTION("group or others may read it") {
    REQUIRE(::chmod(path.c_str(), 0640) == 0);
    auto read = read_private_file(key_at(path));
    REQUIRE_FALSE(read);
    CHECK(read.err().message == "test key file " + path + " is accessible to group or others (mode 0640); run: chmod 600 " + path);
  }
  SECTION("larger than its bound") {
    std::ofstream(path, std::ios::trunc) << std::string(65, 'x');
    auto read = read_private_file(key_at(path));
    REQUIRE_FALSE(read);
    CHECK(read.err().message.find("is too large") != std::string::npos);
  }
  SECTION("a symbolic link, unless links are followed") {
    const auto link = dir.path + "/link";
    REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
    auto refused = read_private_file(key_at(link));
    REQUIRE_FALSE(refused);
    CHECK(refused.err().message == "test key file " + link + " is a symbolic link");
    CHECK(read_private_file(key_at(link, true)).value() == "key");
  }
  SECTION("a directory") {
    auto read = read_private_file(key_at(dir.path));
    REQUIRE_FALSE(read);
    CHECK(read.err().message.find("is not a regular file") != std::string::npos);
  }
}
