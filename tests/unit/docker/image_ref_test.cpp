#include <catch2/catch.hpp>
#include <vector>

#include "image_ref.hpp"
#include "sandfort/docker/image_ref.hpp"

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

namespace {

const std::string hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

void check_parse(const std::string& ref, const char* registry, const std::string& path, const char* tag,
                 const std::string& digest = {}) {
  INFO("reference " << ref);
  auto r = sandfort::docker::parse_image_reference(ref);
  INFO((r ? std::string() : r.err().message));
  REQUIRE(r.ok());
  CHECK(r->registry == registry);
  CHECK(r->path == path);
  CHECK(r->tag == tag);
  CHECK(r->digest == digest);
}

}  // namespace

TEST_CASE("image references name their registry the way the engine reads them") {
  // docker.io unless the first component has '.', ':', is localhost or has upper case.
  check_parse("python:3.12-slim", "docker.io", "library/python", "3.12-slim");
  check_parse("python", "docker.io", "library/python", "");
  check_parse("docker.io/library/python", "docker.io", "library/python", "");
  check_parse("index.docker.io/x/y:1", "docker.io", "x/y", "1");
  check_parse("sandfort/base:bookworm", "docker.io", "sandfort/base", "bookworm");
  check_parse("localhost:5000", "docker.io", "library/localhost", "5000");  // no '/': a tag, not a port
  check_parse("a/b/c", "docker.io", "a/b/c", "");
  check_parse("ghcr.io/x/y@sha256:" + hex64, "ghcr.io", "x/y", "", "sha256:" + hex64);
  check_parse("ghcr.io/x/y:2@sha256:" + hex64, "ghcr.io", "x/y", "2", "sha256:" + hex64);
  check_parse("127.0.0.1:8080/v1/whoami:latest", "127.0.0.1:8080", "v1/whoami", "latest");
  check_parse("localhost/x", "localhost", "x", "");
  check_parse("LOCALHOST/x", "LOCALHOST", "x", "");
  check_parse("Registry/x", "Registry", "x", "");
  check_parse("[::1]:5000/x", "[::1]:5000", "x", "");
  check_parse("[fe80::1]/x", "[fe80::1]", "x", "");
  check_parse("0x7f.1:80/x", "0x7f.1:80", "x", "");
  check_parse("2130706433:80/x", "2130706433:80", "x", "");
  check_parse("10.0.0.1/x", "10.0.0.1", "x", "");
  check_parse("169.254.169.254/latest", "169.254.169.254", "latest", "");
  check_parse("reg-1.example.com:443/a__b/c-d.e_f--g:v1.0-rc_1", "reg-1.example.com:443", "a__b/c-d.e_f--g",
              "v1.0-rc_1");
}

TEST_CASE("registry host and port come apart, IPv6 brackets dropped") {
  auto v6 = sandfort::docker::parse_image_reference("[::1]:5000/x");
  REQUIRE(v6.ok());
  CHECK(v6->ipv6_literal());
  CHECK(v6->host() == "::1");
  CHECK(v6->port() == "5000");
  auto v4 = sandfort::docker::parse_image_reference("127.0.0.1:8080/x");
  REQUIRE(v4.ok());
  CHECK_FALSE(v4->ipv6_literal());
  CHECK(v4->host() == "127.0.0.1");
  CHECK(v4->port() == "8080");
  auto hub = sandfort::docker::parse_image_reference("python");
  REQUIRE(hub.ok());
  CHECK(hub->host() == "docker.io");
  CHECK(hub->port().empty());
}

TEST_CASE("references the engine would refuse are refused") {
  for (const std::string& bad :
       {std::string(), hex64, std::string("Python"), std::string("a/B"), std::string("x:"), std::string("x:-tag"),
        std::string("x:" + std::string(129, 't')), std::string("x@sha256:abc"), std::string("x@sha256"),
        std::string("x@:" + hex64), std::string("x@1sha:" + hex64), std::string("a//b"), std::string("/a"),
        std::string("a/"), std::string("a/-b"), std::string("a/b-"), std::string("a/b._c"), std::string("a/b...c"),
        std::string("reg:port/x"), std::string("reg:/x"), std::string("-reg.io/x"), std::string("reg-.io/x"),
        std::string("reg..io/x"), std::string("[::1/x"), std::string("[]/x"), std::string("[::g]/x"),
        std::string("[::1]x/y"), std::string("[fe80::1%eth0]/x"), std::string("host.io/a b"),
        std::string("a/b:c/d"), std::string("reg.io/" + std::string(250, 'a'))}) {
    INFO("reference '" << bad << "'");
    auto r = sandfort::docker::parse_image_reference(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == errc::invalid_argument);
  }
}

TEST_CASE("spellings the engine would take for an image id or an id prefix are refused") {
  const std::string hex = "2f3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718";
  const std::vector<std::string> spellings = {"sha256:2", "sha256:" + hex.substr(0, 12), "sha256:" + hex,
                                              "sha512:ab", "docker.io/library/sha256:2f", "library/sha384:0",
                                              hex.substr(0, 12), hex.substr(0, 1), hex, "deadbeef"};
  for (const auto& ref : spellings) {
    INFO(ref);
    auto r = docker::parse_image_reference(ref);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::invalid_argument);
  }
  // Names that merely look alike are names.
  for (const char* ref : {"sha256", "sha256:latest", "someone/sha256:2", "deadbeef:1", "cafe-x", "ghcr.io/x/abc"})
    CHECK(docker::parse_image_reference(ref).ok());
}

TEST_CASE("the name the engine lists a reference under") {
  auto listed = [](const char* ref) { return docker::listed_name(*docker::parse_image_reference(ref)); };
  CHECK(listed("python:3.12-slim") == "python:3.12-slim");
  CHECK(listed("python") == "python:latest");
  CHECK(listed("docker.io/library/python:3") == "python:3");
  CHECK(listed("index.docker.io/someone/img") == "someone/img:latest");
  CHECK(listed("ghcr.io/x/y:1") == "ghcr.io/x/y:1");
  CHECK(listed("localhost:5000/x") == "localhost:5000/x:latest");
  const std::string digest = "sha256:" + std::string(64, 'a');
  CHECK(listed(("python:3@" + digest).c_str()) == "python@" + digest);
  CHECK(listed(("ghcr.io/x/y@" + digest).c_str()) == "ghcr.io/x/y@" + digest);
}
