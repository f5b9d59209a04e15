// Listening ports: the /proc/net/tcp parser on fixed text, and GET /ports on the real agent
// seeing a socket this test opens.

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_client.hpp"
#include "ports/listening.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::agent::test;
using nlohmann::json;

namespace {

// Real lines (from a Linux 6.1 host), trimmed: a listener on 0.0.0.0:8080, an established
// connection, a listener on 127.0.0.1:5432; and the tcp6 ones: [::]:22, [::1]:631, and
// ::ffff:127.0.0.1:9000.
constexpr const char* tcp4 =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 31337 1 0000000000000000 100 0 0 10 0\n"
    "   1: 0100007F:1F90 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 20 4 30 10 -1\n"
    "   2: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000   105        0 2222 1 0000000000000000 100 0 0 10 0\n";
constexpr const char* tcp6 =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0\n"
    "   1: 00000000000000000000000001000000:0277 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3333 1 0000000000000000 100 0 0 10 0\n"
    "   2: 0000000000000000FFFF00000100007F:2328 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5555 1 0000000000000000 100 0 0 10 0\n";

struct listener {
  int fd = -1;
  unsigned port = 0;
  explicit listener(bool v6) {
    fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    if (v6) {
      sockaddr_in6 addr{};
      addr.sin6_family = AF_INET6;
      addr.sin6_addr = in6addr_loopback;
      REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
      socklen_t len = sizeof addr;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      port = ntohs(addr.sin6_port);
    } else {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
      socklen_t len = sizeof addr;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      port = ntohs(addr.sin_port);
    }
    REQUIRE(::listen(fd, 4) == 0);
  }
  ~listener() { ::close(fd); }
};

std::optional<json> find_port(const json& items, unsigned port, const std::string& address) {
  for (const auto& item : items)
    if (item["port"] == port && item["address"] == address) return item;
  return std::nullopt;
}

}  // namespace

TEST_CASE("ports: /proc/net/tcp lines in LISTEN state are parsed", "[ports]") {
  auto v4 = agent::ports::parse_proc_net_tcp(tcp4, false);
  REQUIRE(v4.size() == 2);
  CHECK(v4[0].port == 8080);
  CHECK(v4[0].address == "0.0.0.0");
  CHECK(v4[0].inode == 31337);
  CHECK_FALSE(v4[0].ipv6);
  CHECK(v4[1].port == 5432);
  CHECK(v4[1].address == "127.0.0.1");

  auto v6 = agent::ports::parse_proc_net_tcp(tcp6, true);
  REQUIRE(v6.size() == 3);
  CHECK(v6[0].port == 22);
  CHECK(v6[0].address == "::");
  CHECK(v6[0].ipv6);
  CHECK(v6[1].port == 631);
  CHECK(v6[1].address == "::1");
  CHECK(v6[2].port == 9000);
  CHECK(v6[2].address == "::ffff:127.0.0.1");

  CHECK(agent::ports::parse_proc_net_tcp("", false).empty());
  CHECK(agent::ports::parse_proc_net_tcp("header\n garbage line\n", false).empty());
}

TEST_CASE("ports: GET /ports lists a listener with its process", "[ports]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  listener v4(false);
  listener v6(true);
  std::string comm = read_file("/proc/self/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();

  auto res = sandfort::testing::run_coroutine(
      http::unix_request(agent.socket(), http::make_request(http::verb::get, "/ports"), http::client_options{}));
  REQUIRE(res.ok());
  REQUIRE(res->result_int() == 200);
  json items = json::parse(res->body())["items"];

  auto mine = find_port(items, v4.port, "127.0.0.1");
  REQUIRE(mine);
  CHECK((*mine)["protocol"] == "tcp");
  CHECK((*mine)["family"] == "ipv4");
  CHECK((*mine)["pid"] == ::getpid());
  CHECK((*mine)["process"] == comm);

  auto mine6 = find_port(items, v6.port, "::1");
  REQUIRE(mine6);
  CHECK((*mine6)["family"] == "ipv6");
  CHECK((*mine6)["pid"] == ::getpid());

  // Sorted by port, no duplicates of port + address.
  for (std::size_t i = 1; i < items.size(); ++i) {
    CHECK(items[i - 1]["port"] <= items[i]["port"]);
    CHECK_FALSE((items[i - 1]["port"] == items[i]["port"] && items[i - 1]["address"] == items[i]["address"]));
  }
}
