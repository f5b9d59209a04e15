// The registry allowlist for create's `snapshot`: references are read with the engine's rules,
// registries outside the list and local registry hosts are refused unless listed exactly.

#include <catch2/catch.hpp>

#include "sandfort/sandbox/image_policy.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;

namespace {

const std::string digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

struct ref_case {
  std::string ref;
  bool allowed;
  const char* in_message;  // for refusals: what the message must name
};

void check_table(const image_policy& policy, const std::vector<ref_case>& table) {
  for (const auto& c : table) {
    INFO("snapshot " << c.ref);
    auto r = policy.check(c.ref);
    if (c.allowed) {
      INFO((r ? std::string() : r.err().message));
      CHECK(r.ok());
    } else {
      REQUIRE_FALSE(r.ok());
      CHECK(r.err().code == errc::invalid_argument);
      INFO("message: " << r.err().message);
      CHECK_THAT(r.err().message, Catch::Contains(c.in_message));
    }
  }
}

}  // namespace

TEST_CASE("images: by default only the default image's registry and docker.io", "[sandbox][images]") {
  image_policy policy({}, "sandfort/base:bookworm");
  CHECK(policy.allowed() == std::vector<std::string>{"docker.io"});
  check_table(policy, {
      {"python:3.12-slim", true, ""},
      {"python", true, ""},
      {"docker.io/library/python", true, ""},
      {"index.docker.io/library/python:3", true, ""},
      {"DOCKER.IO/library/python", true, ""},
      {"sandfort/base:bookworm", true, ""},
      {"python@" + digest, true, ""},
      {"ghcr.io/x/y@" + digest, false, "images.allowed_registries"},
      {"ghcr.io/x/y", false, "\"ghcr.io\""},
      {"quay.io/x/y:1", false, "images.allowed_registries (docker.io)"},
      {"127.0.0.1:8080/v1/whoami:latest", false, "\"127.0.0.1:8080\", a loopback address"},
      {"localhost/x", false, "\"localhost\", a local-use name"},
      {"localhost:5000/x", false, "local-use name"},
      {"LocalHost:5000/x", false, "local-use name"},
      {"registry.localhost/x", false, "local-use name"},
      {"[::1]:5000/x", false, "a loopback address"},
      {"[::ffff:7f00:1]:5000/x", false, "a loopback address"},
      {"[::]:5000/x", false, "an unspecified address"},
      {"[fe80::1]/x", false, "a link-local address"},
      {"[fd00::1]/x", false, "a private address"},
      {"0x7f.1:80/x", false, "a loopback address"},
      {"127.1:80/x", false, "a loopback address"},
      {"0177.0.0.1/x", false, "a loopback address"},
      {"2130706433:80/x", false, "a loopback address"},
      {"0:80/x", false, "an unspecified address"},
      {"0.0.0.0/x", false, "an unspecified address"},
      {"10.0.0.1/x", false, "a private address"},
      {"192.168.1.10:5000/x", false, "a private address"},
      {"172.16.0.1/x", false, "a private address"},
      {"100.64.0.1/x", false, "a cgnat address"},
      {"169.254.169.254/latest", false, "a link-local address"},
      {"1.2.3.4.5/x", false, "no IPv4 address"},
      {"metadata.google.internal/x", false, "local-use name (.internal)"},
      {"printer.local/x", false, "local-use name (.local)"},
      {"myhost:5000/x", false, "a name of one label"},
      {"Python", false, "snapshot"},
      {"", false, "empty"},
  });
}

TEST_CASE("images: an operator's list, exact local mirrors and '*'", "[sandbox][images]") {
  SECTION("the default image's registry joins the default list") {
    image_policy policy({}, "registry.example.com:5000/base/img:1");
    CHECK(policy.allowed() == std::vector<std::string>{"docker.io", "registry.example.com:5000"});
    check_table(policy, {{"registry.example.com:5000/team/x", true, ""},
                         {"registry.example.com/team/x", false, "not in images.allowed_registries"},
                         {"python", true, ""}});
  }
  SECTION("a local mirror is allowed only as written") {
    image_policy policy({"127.0.0.1:5000", "ghcr.io"}, "sandfort/base:bookworm");
    check_table(policy, {
        {"127.0.0.1:5000/sandfort/tiny:1", true, ""},
        {"127.0.0.1:5001/sandfort/tiny:1", false, "a loopback address"},
        {"127.1:5000/sandfort/tiny:1", false, "a loopback address"},
        {"localhost:5000/sandfort/tiny:1", false, "local-use name"},
        {"127.0.0.1/sandfort/tiny:1", false, "a loopback address"},
        {"ghcr.io/x/y@" + digest, true, ""},
        {"GHCR.io/x/y", true, ""},
        {"ghcr.io:443/x/y", false, "not in images.allowed_registries"},
        {"python", false, "not in images.allowed_registries (127.0.0.1:5000, ghcr.io)"},
    });
  }
  SECTION("'*' allows every public registry, never a local one") {
    image_policy policy({"*"}, "sandfort/base:bookworm");
    check_table(policy, {
        {"ghcr.io/x/y", true, ""},
        {"quay.io:443/x/y:1", true, ""},
        {"python", true, ""},
        {"8.8.8.8:5000/x", true, ""},
        {"[2606:4700::1111]:5000/x", true, ""},
        {"127.0.0.1:8080/v1/whoami:latest", false, "a loopback address"},
        {"localhost/x", false, "local-use name"},
        {"169.254.169.254/latest", false, "a link-local address"},
        {"[::1]:5000/x", false, "a loopback address"},
        {"0x7f.1:80/x", false, "a loopback address"},
        {"myhost:5000/x", false, "a name of one label"},
    });
  }
  SECTION("'*' plus an exact local mirror") {
    image_policy policy({"*", "localhost:5000"}, "sandfort/base:bookworm");
    check_table(policy, {{"localhost:5000/x", true, ""}, {"localhost:5001/x", false, "local-use name"}});
  }
}

TEST_CASE("images: local_host_reason reads the host the way a resolver does", "[sandbox][images]") {
  auto reason = [](const std::string& ref) {
    auto parsed = docker::parse_image_reference(ref);
    REQUIRE(parsed.ok());
    return local_host_reason(*parsed);
  };
  CHECK_FALSE(reason("ghcr.io/x"));
  CHECK_FALSE(reason("python"));
  CHECK_FALSE(reason("1e100.net/x"));
  CHECK_FALSE(reason("notlocalhost.example/x"));
  CHECK_FALSE(reason("localhost.example.com/x"));
  CHECK(reason("0x7f000001:1/x") == std::optional<std::string>("a loopback address"));
  CHECK(reason("017700000001:1/x") == std::optional<std::string>("a loopback address"));
  CHECK(reason("0xa9.0xfe.0xa9.0xfe/x") == std::optional<std::string>("a link-local address"));
  CHECK(reason("[::ffff:a9fe:a9fe]/x") == std::optional<std::string>("a link-local address"));
  CHECK(reason("[64:ff9b::a00:1]/x") == std::optional<std::string>("a private address"));
  CHECK(reason("224.0.0.1/x") == std::optional<std::string>("a multicast address"));
}
