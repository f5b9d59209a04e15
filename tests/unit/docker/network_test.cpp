// The sandbox network: the body we send, how Docker's description is read, and the whole
// round trip on the real engine.

#include <unistd.h>

#include <cstdlib>

#include <catch2/catch.hpp>

#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"
#include "support.hpp"
#include "unix_engine.hpp"

using namespace sandfort;
using namespace sandfort::docker;
using test::run;

TEST_CASE("the network body asks for an internal bridge without inter-container traffic", "[docker]") {
  network_spec spec{"sandfort", "10.213.0.0/16", "10.213.0.1", "sandfort0", {{"io.sandfort.network", "1"}}};
  auto body = to_network_body(spec);
  CHECK(body["Internal"] == true);
  CHECK(body["Driver"] == "bridge");
  CHECK(body["EnableIPv6"] == false);
  CHECK(body["Options"]["com.docker.network.bridge.enable_icc"] == "false");
  CHECK(body["Options"]["com.docker.network.bridge.name"] == "sandfort0");
  CHECK(body["IPAM"]["Config"][0]["Subnet"] == "10.213.0.0/16");
  CHECK(body["IPAM"]["Config"][0]["Gateway"] == "10.213.0.1");
  CHECK(body["Labels"]["io.sandfort.network"] == "1");
}

TEST_CASE("a network description is read back, with Docker's implicit gateway filled in", "[docker]") {
  auto body = nlohmann::json::parse(R"({
    "Name": "sf", "Id": "0123456789abcdef0123", "Internal": true,
    "IPAM": {"Config": [{"Subnet": "fd00::/64"}, {"Subnet": "10.9.8.0/24"}]},
    "Options": {"com.docker.network.bridge.enable_icc": "false"},
    "Labels": {"a": "b"}, "Containers": {"c1": {}, "c2": {}}})");
  auto info = parse_network(body);
  REQUIRE(info.ok());
  CHECK(info->subnet == "10.9.8.0/24");
  CHECK(info->gateway == "10.9.8.1");
  CHECK(info->bridge == "br-0123456789ab");
  CHECK(info->internal);
  CHECK_FALSE(info->inter_container);
  CHECK(info->labels.at("a") == "b");
  CHECK(info->containers.size() == 2);
}

TEST_CASE("a network description with fields of unexpected types is read, never thrown on", "[docker]") {
  // fuzz_docker_responses: "Internal" as an object made json::value() throw out of parse_network.
  for (const char* internal : {"{}", "[]", "\"true\"", "1", "null"}) {
    INFO(internal);
    auto body = nlohmann::json::parse(std::string(R"({"Name": "sf", "Id": "0123456789abcdef0123", "Internal": )") +
                                      internal + R"(, "Options": [], "IPAM": "x", "Labels": 3, "Containers": []})");
    auto info = parse_network(body);
    REQUIRE(info.ok());
    CHECK_FALSE(info->internal);  // not a boolean true: not internal, so sandfortd refuses the network
    CHECK(info->bridge == "br-0123456789ab");
    CHECK(info->subnet.empty());
  }
}

TEST_CASE("stats are computed as the docker CLI does, on cgroup v1 and v2 answers", "[docker]") {
  auto v1 = nlohmann::json::parse(R"({
    "pids_stats": {"current": 7},
    "cpu_stats": {"cpu_usage": {"total_usage": 3000, "percpu_usage": [1, 2]}, "system_cpu_usage": 20000},
    "precpu_stats": {"cpu_usage": {"total_usage": 1000}, "system_cpu_usage": 10000},
    "memory_stats": {"usage": 5000, "limit": 100000, "stats": {"total_inactive_file": 1000, "cache": 3000}}})");
  auto s = parse_stats(v1);
  CHECK(s.cpu_percent == Approx(40.0));  // 2000 / 10000 * 2 CPUs
  CHECK(s.memory_bytes == 4000);
  CHECK(s.memory_limit_bytes == 100000);
  CHECK(s.pids == 7);
  auto v2 = nlohmann::json::parse(R"({
    "cpu_stats": {"cpu_usage": {"total_usage": 500}, "system_cpu_usage": 1000, "online_cpus": 4},
    "precpu_stats": {"cpu_usage": {"total_usage": 500}, "system_cpu_usage": 500},
    "memory_stats": {"usage": 800, "stats": {"inactive_file": 900}}})");
  auto t = parse_stats(v2);
  CHECK(t.cpu_percent == 0);
  CHECK(t.memory_bytes == 800);  // never negative
  CHECK(parse_stats(nlohmann::json::object()).pids == 0);
}

// Found by tests/fuzz/fuzz_docker_responses: a counter past 2^64 is a JSON float, and reading it
// as int64 was undefined; so was subtracting a negative "previous" counter from a huge one.
TEST_CASE("stats read counters that are not unsigned integers as zero", "[docker]") {
  auto odd = nlohmann::json::parse(R"({
    "cpu_stats": {"cpu_usage": {"total_usage": 18447473406709551615}, "system_cpu_usage": 18446744073709551615,
                  "online_cpus": 2},
    "precpu_stats": {"cpu_usage": {"total_usage": -9223372036854775807}, "system_cpu_usage": -5},
    "memory_stats": {"usage": 1.5e300, "limit": -1}, "pids_stats": {"current": 3.0}})");
  auto s = parse_stats(odd);
  CHECK(s.cpu_percent == 0);  // the total is unknown: no percentage
  CHECK(s.memory_bytes == 0);
  CHECK(s.memory_limit_bytes == 0);
  CHECK(s.pids == 0);
  auto huge = nlohmann::json::parse(R"({"memory_stats": {"usage": 18446744073709551615}})");
  CHECK(parse_stats(huge).memory_bytes == INT64_MAX);
}

TEST_CASE("first_host_address takes IPv4 CIDRs only", "[docker]") {
  CHECK(*first_host_address("10.213.0.0/16") == "10.213.0.1");
  CHECK(*first_host_address("192.168.7.64/26") == "192.168.7.65");
  for (const char* bad : {"10.213.0.1/16", "10.0.0.0", "10.0.0.0/31", "10.0.0.0/4", "fd00::/64", "x/16", "10.0.0.0/16x"})
    CHECK_FALSE(first_host_address(bad).ok());
}

TEST_CASE("a network is created, inspected and joined on the real engine", "[docker]") {
  if (!test::docker_tests_enabled()) return;
  unix_engine engine(unix_engine_options{});
  std::string token = std::to_string(::getpid() % 100000);
  // Apart from sandfortd's default 10.213.0.0/16 (./scripts/run's network stays on this machine)
  // and from the integration harness's 10.215.0.0/16.
  network_spec spec{"sandfort-test-net-" + token, "10.216.251.0/24", "10.216.251.1", "sft" + token,
                    {{test::test_label, token}}};
  struct cleanup {
    std::string name;
    ~cleanup() { std::system(("docker network rm " + name + " >/dev/null 2>&1").c_str()); }
  } guard{spec.name};
  auto created = run(engine.create_network(spec));
  REQUIRE(created.ok());
  CHECK(created->internal);
  CHECK_FALSE(created->inter_container);
  CHECK(created->gateway == "10.216.251.1");
  CHECK(created->bridge == spec.bridge);
  CHECK(created->labels.at(test::test_label) == token);

  auto again = run(engine.create_network(spec));
  REQUIRE_FALSE(again.ok());
  CHECK(again.err().code == errc::conflict);

  // Another name on the same addresses: Docker refuses (403), and the message names the fix.
  network_spec overlapping = spec;
  overlapping.name += "-overlap";
  overlapping.bridge = "sfo" + token;
  cleanup overlap_guard{overlapping.name};
  auto taken = run(engine.create_network(overlapping));
  REQUIRE_FALSE(taken.ok());
  CHECK(taken.err().code == errc::invalid_argument);
  CHECK(taken.err().message.find("overlaps") != std::string::npos);
  CHECK(taken.err().message.find("set network.subnet") != std::string::npos);

  container_spec c;
  c.name = "sandfort-test-net-member-" + token;
  c.image = test::base_image;
  c.entrypoint = {"sleep", "300"};
  c.labels = {{test::test_label, token}};
  c.network_mode = spec.name;
  c.memory_bytes = 64ll << 20;
  c.pids_limit = 64;
  c.stop_timeout_s = 1;
  auto id = run(engine.create_container(c));
  REQUIRE(id.ok());
  struct remove_container {
    unix_engine& engine;
    std::string id;
    ~remove_container() { (void)run(engine.remove_container(id)); }
  } container_guard{engine, *id};
  REQUIRE(run(engine.start_container(*id)).ok());
  auto inspected = run(engine.inspect_container(*id));
  REQUIRE(inspected.ok());
  REQUIRE(inspected->addresses.count(spec.name) == 1);
  CHECK(inspected->addresses.at(spec.name).rfind("10.216.251.", 0) == 0);
  auto with_member = run(engine.inspect_network(spec.name));
  REQUIRE(with_member.ok());
  CHECK(with_member->containers.size() == 1);

  auto missing = run(engine.inspect_network("sandfort-test-no-such-net"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.err().code == errc::not_found);
}
