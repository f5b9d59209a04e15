// Not a fuzzer: the proxy's view of addresses, for differential_address.py. One input per line
// on stdin; one line per input on stdout, tab-separated:
//   target  ok|bad   parse_request_target(CONNECT, "<input>:443" or "[<input>]:443")
//   strict  ADDR CLASS | - -    boost make_address (inet_pton): how literals and ranges are read
//   numeric ADDR CLASS | - -    getaddrinfo(AI_NUMERICHOST): what the resolver hands the policy
//                               for a name that is a number ("127.1", "0x7f.1", "2130706433")
//   refuse  yes|no|-            egress_policy with no ranges, on the numeric address
// An IPv6 result is printed in Boost's canonical spelling (scope id included).

#include <netdb.h>
#include <sys/socket.h>

#include <boost/asio/ip/address.hpp>
#include <cstring>
#include <iostream>
#include <string>

#include "sandfort/proxy/policy.hpp"
#include "sandfort/proxy/request.hpp"

namespace ip = boost::asio::ip;
using namespace sandfort::proxy;

namespace {

std::optional<ip::address> numeric(const std::string& text) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(text.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return std::nullopt;
  std::optional<ip::address> out;
  if (found->ai_family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(found->ai_addr);
    out = ip::address_v4(ntohl(sin->sin_addr.s_addr));
  } else if (found->ai_family == AF_INET6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(found->ai_addr);
    ip::address_v6::bytes_type b;
    std::memcpy(b.data(), sin6->sin6_addr.s6_addr, 16);
    out = ip::address_v6(b, sin6->sin6_scope_id);
  }
  ::freeaddrinfo(found);
  return out;
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  egress_policy policy({});
  std::string line;
  while (std::getline(std::cin, line)) {
    bool v6ish = line.find(':') != std::string::npos;
    auto target = parse_request_target(true, (v6ish ? "[" + line + "]" : line) + ":443");
    std::cout << (target ? "ok" : "bad");
    boost::system::error_code ec;
    auto strict = ip::make_address(line, ec);
    if (ec)
      std::cout << "\t-\t-";
    else
      std::cout << '\t' << strict.to_string() << '\t' << to_string(classify(strict));
    auto num = numeric(line);
    if (num)
      std::cout << '\t' << num->to_string() << '\t' << to_string(classify(*num)) << '\t'
                << (policy.refuse_reason(*num) ? "yes" : "no");
    else
      std::cout << "\t-\t-\t-";
    std::cout << '\n';
  }
  return 0;
}
