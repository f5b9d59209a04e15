// Who a request comes from: the TCP peer, the client behind sandfortd's own TLS front, or a
// trusted proxy's X-Forwarded-For — never what an untrusted sender wrote.
#include <catch2/catch.hpp>

#include "sandfort/api/client_address.hpp"

using namespace sandfort;

namespace {

api::client_addresses with_trusted(const char* ranges) {
  auto parsed = proxy::parse_cidr_list(ranges);
  REQUIRE(parsed);
  return api::client_addresses(std::move(*parsed));
}

}  // namespace

TEST_CASE("client address: without trusted proxies X-Forwarded-For is ignored", "[api][client_address]") {
  auto c = with_trusted("");
  CHECK(c.resolve({"198.51.100.7", 40000}, "203.0.113.9") == "198.51.100.7");
  CHECK(c.resolve({"198.51.100.7", 40000}, "") == "198.51.100.7");
  CHECK(c.resolve({"unix", 0}, "203.0.113.9") == "unix");
}

TEST_CASE("client address: a trusted proxy's right-most untrusted hop is the client", "[api][client_address]") {
  auto c = with_trusted("10.0.0.0/8, ::1/128");
  // The proxy appended the address it saw; what the client wrote to the left proves nothing.
  CHECK(c.resolve({"10.1.2.3", 5000}, "203.0.113.9, 198.51.100.7") == "198.51.100.7");
  CHECK(c.resolve({"10.1.2.3", 5000}, "198.51.100.7") == "198.51.100.7");
  // A chain of trusted proxies is walked through.
  CHECK(c.resolve({"10.1.2.3", 5000}, "198.51.100.7,10.9.9.9 ,  10.8.8.8") == "198.51.100.7");
  // Every hop trusted: the left-most one.
  CHECK(c.resolve({"10.1.2.3", 5000}, "10.9.9.9") == "10.9.9.9");
  // No header from a trusted peer: the peer.
  CHECK(c.resolve({"10.1.2.3", 5000}, "") == "10.1.2.3");
  // An untrusted peer's header is not read at all.
  CHECK(c.resolve({"192.0.2.1", 5000}, "10.0.0.1, 198.51.100.7") == "192.0.2.1");
  CHECK(c.resolve({"::1", 5000}, "2001:db8::5") == "2001:db8::5");
}

TEST_CASE("client address: hop spellings, and hops that are no address", "[api][client_address]") {
  auto c = with_trusted("127.0.0.0/8");
  CHECK(c.resolve({"127.0.0.1", 1}, "[2001:db8::5]:443") == "2001:db8::5");
  CHECK(c.resolve({"127.0.0.1", 1}, "198.51.100.7:8443") == "198.51.100.7");
  CHECK(c.resolve({"127.0.0.1", 1}, "::ffff:198.51.100.7") == "198.51.100.7");
  // A mapped spelling of a trusted proxy is trusted too.
  CHECK(c.resolve({"::ffff:127.0.0.1", 1}, "198.51.100.7") == "198.51.100.7");
  // Garbage where an address should be: the last address known for sure, not the garbage.
  CHECK(c.resolve({"127.0.0.1", 1}, "198.51.100.7, unknown") == "127.0.0.1");
  CHECK(c.resolve({"127.0.0.1", 1}, "198.51.100.7, ") == "127.0.0.1");
  CHECK(c.resolve({"127.0.0.1", 1}, "[2001:db8::5") == "127.0.0.1");
}

TEST_CASE("client address: a header of many trusted hops is walked a bounded way", "[api][client_address]") {
  auto c = with_trusted("10.0.0.0/8");
  std::string header = "198.51.100.7";
  for (int i = 0; i < 5000; ++i) header += ", 10.0.0.1";
  // Far from the right end: not reached, and the answer is an address the proxies wrote.
  CHECK(c.resolve({"10.0.0.2", 1}, header) == "10.0.0.1");
  CHECK(c.resolve({"10.0.0.2", 1}, "198.51.100.7, 10.0.0.1, 10.0.0.1") == "198.51.100.7");
}

TEST_CASE("client address: the TLS front's loopback connections carry their client", "[api][client_address]") {
  auto c = with_trusted("");
  c.relay_opened(41000, "203.0.113.9");
  CHECK(c.resolve({"127.0.0.1", 41000}, "") == "203.0.113.9");
  // The header is still the client's own words.
  CHECK(c.resolve({"127.0.0.1", 41000}, "192.0.2.1") == "203.0.113.9");
  // Another port, or the same port from elsewhere, is someone else.
  CHECK(c.resolve({"127.0.0.1", 41001}, "") == "127.0.0.1");
  CHECK(c.resolve({"198.51.100.7", 41000}, "") == "198.51.100.7");
  c.relay_closed(41000);
  CHECK(c.resolve({"127.0.0.1", 41000}, "") == "127.0.0.1");

  // A trusted proxy in front of the TLS front: its header counts.
  auto behind = with_trusted("192.0.2.0/24");
  behind.relay_opened(41002, "192.0.2.10");
  CHECK(behind.resolve({"127.0.0.1", 41002}, "203.0.113.9") == "203.0.113.9");
}

TEST_CASE("client address: a connection counts against its peer, the TLS front's client, or nobody for a trusted proxy",
          "[api][client_address]") {
  auto clients = with_trusted("10.0.0.0/8");
  CHECK(clients.connection_source({"203.0.113.9", 40000}) == "203.0.113.9");
  // A trusted proxy speaks for many clients: not one source before its header says which.
  CHECK(clients.connection_source({"10.1.2.3", 40000}).empty());
  // The TLS front's loopback relay counts as the client behind it.
  clients.relay_opened(50000, "198.51.100.7");
  CHECK(clients.connection_source({"127.0.0.1", 50000}) == "198.51.100.7");
  CHECK(clients.connection_source({"127.0.0.1", 50001}) == "127.0.0.1");
  clients.relay_closed(50000);
  CHECK(clients.connection_source({"127.0.0.1", 50000}) == "127.0.0.1");
}
