#pragma once
// What a sandbox may reach, as pure functions: the host allowlist, the classes of addresses the
// proxy refuses unless an operator allowed their range, and the parsing of "host:port".
// Everything here is decided on values alone, so it is tested exhaustively without sockets.

#include <boost/asio/ip/address.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::proxy {

// Lowercase, one trailing dot dropped: "Example.COM." → "example.com".
std::string normalize_host(std::string_view host);

// Allowlist entries: exact host names, "*.suffix" (every subdomain at any depth, NOT the bare
// suffix), or "*" (any host). Case-insensitive; a trailing dot is ignored on both sides. An entry
// with a '*' anywhere else matches nothing, so a typo never widens the list.
bool host_allowed(const std::vector<std::string>& allowlist, std::string_view host);

enum class address_class {
  global,       // publicly routable: the only class allowed by default
  loopback,     // 127/8, ::1
  private_use,  // 10/8, 172.16/12, 192.168/16, fc00::/7 (and the deprecated site-local fec0::/10)
  link_local,   // 169.254/16 (cloud metadata at 169.254.169.254), fe80::/10
  cgnat,        // 100.64/10
  multicast,    // 224/4, ff00::/8
  unspecified,  // 0/8, ::
  reserved,     // 240/4 with broadcast, 192.0.0/24, 198.18/15, documentation, everything IPv6
                // outside 2000::/3, ...
};

// "public", "loopback", "private", "link-local", "cgnat", "multicast", "unspecified", "reserved".
std::string_view to_string(address_class c) noexcept;

address_class classify(const boost::asio::ip::address_v4& a) noexcept;
// IPv6 forms that carry an IPv4 address are classified by that address, because that is where
// the packets end up:
//   ::ffff:a.b.c.d   IPv4-mapped: the kernel dials the IPv4 address itself.
//   ::a.b.c.d        IPv4-compatible (deprecated), and ::ffff:0:a.b.c.d (SIIT-translated).
//   64:ff9b::/96     NAT64 well-known prefix: the translator dials the IPv4 address.
//   2002::/16        6to4: the IPv4 address in bits 16..47 is the tunnel's end.
//   2001:0::/32      Teredo: the client's IPv4 address (last 32 bits, inverted) is where the
//                    packets go; the server's (bits 32..63) must be public too, so the first
//                    non-public of the two wins.
// The local-use NAT64 prefix 64:ff9b:1::/48 may embed its IPv4 address at several offsets, so it
// is reserved rather than guessed at.
address_class classify(const boost::asio::ip::address_v6& a) noexcept;
address_class classify(const boost::asio::ip::address& a) noexcept;

// An address range, "10.0.0.0/8" or "fd00::/8".
struct cidr {
  boost::asio::ip::address network;
  unsigned prefix_length = 0;

  // Same family only: an IPv4 range does not contain an IPv4-mapped IPv6 address (the policy
  // below handles that form).
  bool contains(const boost::asio::ip::address& a) const noexcept;
  std::string to_string() const;
};

// The prefix length is required; host bits must be zero ("10.0.0.1/8" is refused: in an
// allowlist of ranges a typo should fail loudly, not widen or narrow silently).
result<cidr> parse_cidr(std::string_view text);
// "10.1.0.0/16, fd00::/8": the operator's setting. Empty entries are skipped; any bad one fails.
result<std::vector<cidr>> parse_cidr_list(std::string_view text);

class egress_policy {
 public:
  // Ranges an operator allowed: an address inside one is permitted whatever its class.
  explicit egress_policy(std::vector<cidr> allowed_ranges);

  // nullopt when the proxy may dial `a`; otherwise why not, naming the class
  // ("169.254.169.254 is link-local"). An IPv4-mapped address is matched against IPv4 ranges
  // too, since dialing it reaches the IPv4 address.
  std::optional<std::string> refuse_reason(const boost::asio::ip::address& a) const;

 private:
  std::vector<cidr> allowed_ranges_;
};

struct authority {
  std::string host;  // as given, without brackets; not yet normalized
  unsigned short port = 0;
  bool ipv6_literal = false;  // was written as "[...]"
};

// "host:port" or "[v6]:port". The port is required and 1..65535 (digits only). A name holds only
// letters, digits, '-', '.', '_' (IDNs arrive as punycode), so spaces, control characters, '@',
// '/', '%' and '\\' are refused; a bracketed host must be an IPv6 address.
result<authority> parse_authority(std::string_view text);

}  // namespace sandfort::proxy
