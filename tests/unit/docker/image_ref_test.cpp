#include <catch2/catch.hpp>

#include "image_ref.hpp"

using namespace sandfort;
using sandfort::docker::detail::split_image_ref;

namespace {

void check_split(const char* ref, const char* repository, const char* tag, const char* digest) {
  INFO("reference " << ref);
  auto r = split_image_ref(ref);
  REQUIRE(r.ok());
  CHECK(r->repository == repository);
  CHECK(r->tag == tag);
  CHECK(r->digest == digest);
}

}  // namespace

TEST_CASE("image references split into repository, tag and digest") {
  check_split("debian", "debian", "latest", "");
  check_split("debian:bookworm", "debian", "bookworm", "");
  check_split("sandfort/base:bookworm", "sandfort/base", "bookworm", "");
  check_split("localhost:5000/x/y:1", "localhost:5000/x/y", "1", "");
  check_split("localhost:5000/x/y", "localhost:5000/x/y", "latest", "");
  check_split("127.0.0.1:5000/sandfort/pulltest:1", "127.0.0.1:5000/sandfort/pulltest", "1", "");
  check_split("docker.io/library/debian:12.5", "docker.io/library/debian", "12.5", "");
  check_split("debian@sha256:0123abcd", "debian", "", "sha256:0123abcd");
  check_split("localhost:5000/x@sha256:ff", "localhost:5000/x", "", "sha256:ff");
  check_split("debian:12@sha256:ab", "debian", "12", "sha256:ab");
}

TEST_CASE("the names used to look up and to pull an image") {
  auto tagged = split_image_ref("localhost:5000/x/y");
  REQUIRE(tagged.ok());
  CHECK(tagged->lookup_name() == "localhost:5000/x/y:latest");
  CHECK(tagged->pull_tag() == "latest");
  auto pinned = split_image_ref("debian:12@sha256:ab");
  REQUIRE(pinned.ok());
  CHECK(pinned->lookup_name() == "debian@sha256:ab");
  CHECK(pinned->pull_tag() == "sha256:ab");
}

TEST_CASE("malformed image references are invalid_argument") {
  for (const char* bad : {"", "debian:", "debian@", "debian@sha256", "debian@sha256:", "/debian", "a//b", "x/",
                          "deb ian", "debian\n", "localhost:5000/", "a?b", "a@b@sha256:c"}) {
    INFO("reference '" << bad << "'");
    auto r = split_image_ref(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == errc::invalid_argument);
  }
}
