// The egress policy on values alone: allowlist matching, address classes (IPv6 forms that
// carry an IPv4 address included), ranges, and "host:port".

#include <catch2/catch.hpp>

#include "sandfort/proxy/policy.hpp"

using namespace sandfort;
using namespace sandfort::proxy;
namespace ip = boost::asio::ip;

namespace {

std::string class_of(const char* text) { return std::string(to_string(classify(ip::make_address(text)))); }

cidr range(const char* text) {
  auto r = parse_cidr(text);
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("proxy: host_allowed matches exact names case-insensitively, ignoring a trailing dot", "[proxy][policy]") {
  std::vector<std::string> list{"api.example.com", "Mixed.Case.ORG."};
  CHECK(host_allowed(list, "api.example.com"));
  CHECK(host_allowed(list, "API.Example.COM"));
  CHECK(host_allowed(list, "api.example.com."));
  CHECK(host_allowed(list, "mixed.case.org"));
  CHECK(host_allowed(list, "MIXED.case.org."));
  CHECK_FALSE(host_allowed(list, "example.com"));
  CHECK_FALSE(host_allowed(list, "x.api.example.com"));
  CHECK_FALSE(host_allowed(list, "api.example.com.evil.net"));
  CHECK_FALSE(host_allowed(list, "api.example.co"));
  CHECK_FALSE(host_allowed(list, "api.example.com.."));
  CHECK_FALSE(host_allowed(list, ""));
  CHECK_FALSE(host_allowed(list, "."));
}

TEST_CASE("proxy: host_allowed '*.suffix' covers subdomains at any depth but not the suffix", "[proxy][policy]") {
  std::vector<std::string> list{"*.example.com"};
  CHECK(host_allowed(list, "a.example.com"));
  CHECK(host_allowed(list, "a.b.c.example.com"));
  CHECK(host_allowed(list, "A.EXAMPLE.COM."));
  CHECK_FALSE(host_allowed(list, "example.com"));
  CHECK_FALSE(host_allowed(list, "example.com."));
  CHECK_FALSE(host_allowed(list, "badexample.com"));
  CHECK_FALSE(host_allowed(list, ".example.com"));
  CHECK_FALSE(host_allowed(list, "a.example.com.evil.net"));
  CHECK_FALSE(host_allowed(list, "example.org"));
  CHECK(host_allowed({"*.Example.COM."}, "x.example.com"));
}

TEST_CASE("proxy: host_allowed '*' allows any host, an empty list none, stray '*' nothing", "[proxy][policy]") {
  CHECK(host_allowed({"*"}, "anything.at.all"));
  CHECK(host_allowed({"*"}, "127.0.0.1"));
  CHECK_FALSE(host_allowed({"*"}, ""));
  CHECK_FALSE(host_allowed({}, "example.com"));
  CHECK_FALSE(host_allowed({""}, "example.com"));
  for (const char* odd : {"*.", "**.example.com", "a*.example.com", "*example.com", "x.*.com", "*.*", "*.*.com"}) {
    INFO(odd);
    CHECK_FALSE(host_allowed({odd}, "a.example.com"));
    CHECK_FALSE(host_allowed({odd}, "example.com"));
  }
  CHECK(host_allowed({"nope.org", "*.example.com"}, "a.example.com"));
}

TEST_CASE("proxy: normalize_host lowercases and drops one trailing dot", "[proxy][policy]") {
  CHECK(normalize_host("Example.COM.") == "example.com");
  CHECK(normalize_host("a..") == "a.");
  CHECK(normalize_host("") == "");
  CHECK(normalize_host("::FFFF:7F00:1") == "::ffff:7f00:1");
}

TEST_CASE("proxy: classify IPv4 addresses", "[proxy][policy]") {
  CHECK(class_of("8.8.8.8") == "public");
  CHECK(class_of("1.1.1.1") == "public");
  CHECK(class_of("93.184.216.34") == "public");
  CHECK(class_of("127.0.0.1") == "loopback");
  CHECK(class_of("127.255.255.254") == "loopback");
  CHECK(class_of("10.0.0.1") == "private");
  CHECK(class_of("10.255.255.255") == "private");
  CHECK(class_of("172.16.0.1") == "private");
  CHECK(class_of("172.31.255.255") == "private");
  CHECK(class_of("172.15.255.255") == "public");
  CHECK(class_of("172.32.0.0") == "public");
  CHECK(class_of("192.168.1.1") == "private");
  CHECK(class_of("169.254.169.254") == "link-local");
  CHECK(class_of("169.254.0.1") == "link-local");
  CHECK(class_of("100.64.0.1") == "cgnat");
  CHECK(class_of("100.127.255.255") == "cgnat");
  CHECK(class_of("100.63.255.255") == "public");
  CHECK(class_of("100.128.0.0") == "public");
  CHECK(class_of("224.0.0.1") == "multicast");
  CHECK(class_of("239.255.255.250") == "multicast");
  CHECK(class_of("0.0.0.0") == "unspecified");
  CHECK(class_of("0.1.2.3") == "unspecified");
  CHECK(class_of("240.0.0.1") == "reserved");
  CHECK(class_of("255.255.255.255") == "reserved");
  CHECK(class_of("192.0.0.8") == "reserved");
  CHECK(class_of("192.0.2.1") == "reserved");
  CHECK(class_of("198.18.0.1") == "reserved");
  CHECK(class_of("198.19.255.255") == "reserved");
  CHECK(class_of("198.20.0.0") == "public");
  CHECK(class_of("198.51.100.7") == "reserved");
  CHECK(class_of("203.0.113.9") == "reserved");
  CHECK(class_of("192.88.99.1") == "reserved");
}

TEST_CASE("proxy: classify IPv6 addresses", "[proxy][policy]") {
  CHECK(class_of("2606:4700:4700::1111") == "public");
  CHECK(class_of("2a00:1450:4001:82a::200e") == "public");
  CHECK(class_of("::1") == "loopback");
  CHECK(class_of("::") == "unspecified");
  CHECK(class_of("fc00::1") == "private");
  CHECK(class_of("fd12:3456:789a::1") == "private");
  CHECK(class_of("fec0::1") == "private");
  CHECK(class_of("fe80::1") == "link-local");
  CHECK(class_of("febf::1") == "link-local");
  CHECK(class_of("ff02::1") == "multicast");
  CHECK(class_of("ff0e::1") == "multicast");
  CHECK(class_of("2001:db8::1") == "reserved");
  CHECK(class_of("3fff::1") == "reserved");
  CHECK(class_of("2001:2::1") == "reserved");     // benchmarking, inside 2001::/23
  CHECK(class_of("100::1") == "reserved");        // discard-only
  CHECK(class_of("5f00::1") == "reserved");       // outside 2000::/3
  CHECK(class_of("::1:2:3:4") == "reserved");     // ::/8 that embeds nothing we know
  CHECK(class_of("64:ff9b:1::a00:1") == "reserved");  // local-use NAT64
}

TEST_CASE("proxy: IPv6 forms that embed an IPv4 address take its class", "[proxy][policy]") {
  // IPv4-mapped
  CHECK(class_of("::ffff:127.0.0.1") == "loopback");
  CHECK(class_of("::ffff:169.254.169.254") == "link-local");
  CHECK(class_of("::ffff:10.1.2.3") == "private");
  CHECK(class_of("::ffff:8.8.8.8") == "public");
  // IPv4-compatible (deprecated) and SIIT-translated
  CHECK(class_of("::127.0.0.1") == "loopback");
  CHECK(class_of("::10.0.0.1") == "private");
  CHECK(class_of("::8.8.8.8") == "public");
  CHECK(class_of("::ffff:0:127.0.0.1") == "loopback");
  CHECK(class_of("::ffff:0:8.8.8.8") == "public");
  // NAT64 well-known prefix
  CHECK(class_of("64:ff9b::127.0.0.1") == "loopback");
  CHECK(class_of("64:ff9b::a9fe:a9fe") == "link-local");
  CHECK(class_of("64:ff9b::8.8.8.8") == "public");
  // 6to4: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD
  CHECK(class_of("2002:7f00:1::1") == "loopback");
  CHECK(class_of("2002:a9fe:a9fe::") == "link-local");
  CHECK(class_of("2002:c0a8:101::1") == "private");
  CHECK(class_of("2002:808:808::1") == "public");
  // Teredo: server 8.8.8.8 in bits 32..63, client inverted in the last 32 bits
  CHECK(class_of("2001:0:808:808::80ff:fffe") == "loopback");   // client ~80ff:fffe = 127.0.0.1
  CHECK(class_of("2001:0:808:808::f5ff:fffe") == "private");    // client 10.0.0.1
  CHECK(class_of("2001:0:808:808::f7f7:f7f7") == "public");     // client 8.8.8.8
  CHECK(class_of("2001:0:a00:1::f7f7:f7f7") == "private");      // public client, private server
}

TEST_CASE("proxy: parse_cidr accepts ranges and refuses malformed ones", "[proxy][policy]") {
  auto r = range("10.0.0.0/8");
  CHECK(r.network == ip::make_address("10.0.0.0"));
  CHECK(r.prefix_length == 8);
  CHECK(r.to_string() == "10.0.0.0/8");
  CHECK(range("::1/128").to_string() == "::1/128");
  CHECK(range("0.0.0.0/0").prefix_length == 0);
  CHECK(range("fd00::/8").prefix_length == 8);
  CHECK(range("192.168.1.7/32").prefix_length == 32);
  for (const char* bad : {"", "10.0.0.0", "10.0.0.0/", "10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/+8",
                          "10.0.0.0/8x", "10.0.0.0/ 8", "10.0.0/8", "0x0a.0.0.0/8", "010.0.0.0/8", "host/8",
                          "10.0.0.1/8", "fe80::1%1/64", "fd00::1/8", "10.0.0.0/1000", "/8", "10.0.0.0//8"}) {
    INFO(bad);
    auto parsed = parse_cidr(bad);
    CHECK_FALSE(parsed.ok());
    if (!parsed.ok()) CHECK(parsed.err().code == errc::invalid_argument);
  }
}

TEST_CASE("proxy: cidr contains addresses of its own family only", "[proxy][policy]") {
  auto r = range("127.0.0.0/8");
  CHECK(r.contains(ip::make_address("127.0.0.1")));
  CHECK(r.contains(ip::make_address("127.255.255.255")));
  CHECK_FALSE(r.contains(ip::make_address("128.0.0.0")));
  CHECK_FALSE(r.contains(ip::make_address("::ffff:127.0.0.1")));
  CHECK(range("0.0.0.0/0").contains(ip::make_address("8.8.8.8")));
  CHECK(range("fd00::/8").contains(ip::make_address("fd12::1")));
  CHECK_FALSE(range("fd00::/8").contains(ip::make_address("fc00::1")));
  CHECK(range("2001:db8::/33").contains(ip::make_address("2001:db8:7fff::1")));
  CHECK_FALSE(range("2001:db8::/33").contains(ip::make_address("2001:db8:8000::1")));
}

TEST_CASE("proxy: egress_policy refuses every non-public class, naming it", "[proxy][policy]") {
  egress_policy policy({});
  CHECK_FALSE(policy.refuse_reason(ip::make_address("8.8.8.8")));
  CHECK_FALSE(policy.refuse_reason(ip::make_address("2606:4700::1111")));
  struct refusal {
    const char* address;
    const char* cls;
  };
  for (auto [address, cls] : {refusal{"127.0.0.1", "loopback"}, refusal{"::1", "loopback"},
                              refusal{"10.0.0.1", "private"}, refusal{"fd00::1", "private"},
                              refusal{"169.254.169.254", "link-local"}, refusal{"fe80::1", "link-local"},
                              refusal{"100.64.1.1", "cgnat"}, refusal{"224.0.0.251", "multicast"},
                              refusal{"0.0.0.0", "unspecified"}, refusal{"::", "unspecified"},
                              refusal{"255.255.255.255", "reserved"}, refusal{"::ffff:169.254.169.254", "link-local"},
                              refusal{"64:ff9b::10.0.0.1", "private"}, refusal{"2002:7f00:1::", "loopback"}}) {
    INFO(address);
    auto why = policy.refuse_reason(ip::make_address(address));
    REQUIRE(why);
    CHECK(why->find(cls) != std::string::npos);
    CHECK(why->find(ip::make_address(address).to_string()) != std::string::npos);
  }
}

TEST_CASE("proxy: an operator-allowed range permits an otherwise forbidden address", "[proxy][policy]") {
  egress_policy policy({range("127.0.0.0/8"), range("fd00:1::/32"), range("169.254.169.254/32")});
  CHECK_FALSE(policy.refuse_reason(ip::make_address("127.0.0.1")));
  CHECK_FALSE(policy.refuse_reason(ip::make_address("127.9.9.9")));
  CHECK_FALSE(policy.refuse_reason(ip::make_address("::ffff:127.0.0.1")));  // dials 127.0.0.1
  CHECK_FALSE(policy.refuse_reason(ip::make_address("fd00:1::5")));
  CHECK_FALSE(policy.refuse_reason(ip::make_address("169.254.169.254")));
  CHECK(policy.refuse_reason(ip::make_address("169.254.169.253")));
  CHECK(policy.refuse_reason(ip::make_address("::1")));
  CHECK(policy.refuse_reason(ip::make_address("10.0.0.1")));
  CHECK(policy.refuse_reason(ip::make_address("fd00:2::1")));
  // Embedded forms other than IPv4-mapped need a range of their own.
  CHECK(policy.refuse_reason(ip::make_address("64:ff9b::127.0.0.1")));
  CHECK(policy.refuse_reason(ip::make_address("2002:7f00:1::")));
}

TEST_CASE("proxy: parse_authority reads host:port and [v6]:port", "[proxy][policy]") {
  auto a = parse_authority("Example.com:443");
  REQUIRE(a.ok());
  CHECK(a->host == "Example.com");
  CHECK(a->port == 443);
  CHECK_FALSE(a->ipv6_literal);
  auto v6 = parse_authority("[::1]:8080");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->port == 8080);
  CHECK(v6->ipv6_literal);
  CHECK(parse_authority("[::ffff:127.0.0.1]:1").ok());
  CHECK(parse_authority("127.0.0.1:65535")->port == 65535);
  CHECK(parse_authority("0x7f.1:80").ok());  // an IPv4 spelling: resolved, then checked
  CHECK(parse_authority("2130706433:80").ok());
  CHECK(parse_authority("under_score.example:80").ok());
  CHECK(parse_authority("example.com.:80")->host == "example.com.");
}

TEST_CASE("proxy: parse_authority refuses bad ports and hostile hosts", "[proxy][policy]") {
  for (const char* bad :
       {"example.com", "example.com:", "example.com:0", "example.com:65536", "example.com:99999", "example.com:abc",
        "example.com:-1", "example.com:+80", "example.com:80 ", "example.com: 80", "example.com:0x50",
        "example.com:123456", ":80", "exa mple.com:80", "exa\tmple.com:80", "user@example.com:80",
        "example.com/x:80", "ex\\ample.com:80", "exam%70le.com:80", "exa\rmple.com:80", "exa\nmple.com:80",
        "::1:80", "[::1]", "[::1]80", "[::1:80", "[fe80::1%eth0]:80", "[example.com]:80", "[1.2.3.4]:80",
        "example.com:80:80", "\xc3\xa9xample.com:80", "[]:80"}) {
    INFO(bad);
    auto parsed = parse_authority(bad);
    CHECK_FALSE(parsed.ok());
    if (!parsed.ok()) CHECK(parsed.err().code == errc::invalid_argument);
  }
  CHECK_FALSE(parse_authority(std::string("exa\0mple.com:80", 16)).ok());
  CHECK_FALSE(parse_authority(std::string(300, 'a') + ":80").ok());
}

TEST_CASE("proxy: parse_cidr_list reads the operator's comma-separated ranges", "[proxy][policy]") {
  auto ranges = parse_cidr_list(" 10.1.0.0/16, fd00::/8,,127.0.0.1/32 ");
  REQUIRE(ranges.ok());
  REQUIRE(ranges->size() == 3);
  CHECK((*ranges)[0].to_string() == "10.1.0.0/16");
  CHECK((*ranges)[1].to_string() == "fd00::/8");
  CHECK((*ranges)[2].to_string() == "127.0.0.1/32");
  CHECK(parse_cidr_list("")->empty());
  auto bad = parse_cidr_list("10.0.0.0/8,10.0.0.1/8");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().message.find("10.0.0.1/8") != std::string::npos);
}
