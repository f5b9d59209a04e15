// Address classes, ranges and the egress policy (declared in policy.hpp).
#include "sandfort/proxy/policy.hpp"

#include <array>
#include <charconv>
#include <cstdint>

namespace sandfort::proxy {

namespace ip = boost::asio::ip;

namespace {

struct v4_block {
  std::uint32_t network;
  unsigned prefix;
  address_class cls;
};

constexpr std::uint32_t v4(unsigned a, unsigned b, unsigned c, unsigned d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

// Special-purpose IPv4 blocks (IANA registry, RFC 6890 and successors). Anything else is public.
// The blocks do not overlap.
constexpr std::array<v4_block, 15> v4_blocks{{
    {v4(0, 0, 0, 0), 8, address_class::unspecified},  // "this network"
    {v4(10, 0, 0, 0), 8, address_class::private_use},
    {v4(100, 64, 0, 0), 10, address_class::cgnat},
    {v4(127, 0, 0, 0), 8, address_class::loopback},
    {v4(169, 254, 0, 0), 16, address_class::link_local},
    {v4(172, 16, 0, 0), 12, address_class::private_use},
    {v4(192, 0, 0, 0), 24, address_class::reserved},  // IETF protocol assignments
    {v4(192, 0, 2, 0), 24, address_class::reserved},  // TEST-NET-1
    {v4(192, 88, 99, 0), 24, address_class::reserved},  // 6to4 relay anycast (deprecated)
    {v4(192, 168, 0, 0), 16, address_class::private_use},
    {v4(198, 18, 0, 0), 15, address_class::reserved},     // benchmarking
    {v4(198, 51, 100, 0), 24, address_class::reserved},   // TEST-NET-2
    {v4(203, 0, 113, 0), 24, address_class::reserved},    // TEST-NET-3
    {v4(224, 0, 0, 0), 4, address_class::multicast},
    {v4(240, 0, 0, 0), 4, address_class::reserved},  // future use, and broadcast 255.255.255.255
}};

bool in_prefix(std::uint32_t addr, std::uint32_t network, unsigned prefix) {
  if (prefix == 0) return true;
  std::uint32_t mask = prefix >= 32 ? 0xffffffffu : ~(0xffffffffu >> prefix);
  return (addr & mask) == network;
}

using v6_bytes = ip::address_v6::bytes_type;

bool bytes_prefix_equal(const v6_bytes& a, const v6_bytes& b, unsigned prefix) {
  unsigned full = prefix / 8;
  for (unsigned i = 0; i < full; ++i)
    if (a[i] != b[i]) return false;
  unsigned rest = prefix % 8;
  if (rest == 0) return true;
  auto mask = static_cast<unsigned char>(0xffu << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

ip::address_v4 v4_at(const v6_bytes& b, std::size_t offset, bool inverted = false) {
  ip::address_v4::bytes_type out{};
  for (std::size_t i = 0; i < 4; ++i)
    out[i] = static_cast<unsigned char>(inverted ? ~b[offset + i] : b[offset + i]);
  return ip::address_v4(out);
}

bool zero(const v6_bytes& b, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i)
    if (b[i] != 0) return false;
  return true;
}

// The IPv4 address an IPv6 address carries, for the forms documented in policy.hpp; Teredo is
// handled apart (it carries two).
std::optional<ip::address_v4> embedded_v4(const v6_bytes& b) {
  if (zero(b, 0, 10) && b[10] == 0xff && b[11] == 0xff) return v4_at(b, 12);  // ::ffff:a.b.c.d
  if (zero(b, 0, 12)) return v4_at(b, 12);  // ::a.b.c.d (:: and ::1 are caught before)
  if (zero(b, 0, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0)
    return v4_at(b, 12);  // ::ffff:0:a.b.c.d
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && zero(b, 4, 12))
    return v4_at(b, 12);  // 64:ff9b::/96
  if (b[0] == 0x20 && b[1] == 0x02) return v4_at(b, 2);  // 2002::/16
  return std::nullopt;
}

struct v6_block {
  v6_bytes network;
  unsigned prefix;
  address_class cls;
};

bool host_bits_set(const ip::address& a, unsigned prefix) {
  if (a.is_v4()) return prefix < 32 && (a.to_v4().to_uint() & (0xffffffffu >> prefix)) != 0;
  auto bytes = a.to_v6().to_bytes();
  for (unsigned bit = prefix; bit < 128; ++bit)
    if (bytes[bit / 8] & (0x80u >> (bit % 8))) return true;
  return false;
}

v6_bytes v6_net(const char* text) { return ip::make_address_v6(text).to_bytes(); }

}  // namespace

std::string_view to_string(address_class c) noexcept {
  switch (c) {
    case address_class::global: return "public";
    case address_class::loopback: return "loopback";
    case address_class::private_use: return "private";
    case address_class::link_local: return "link-local";
    case address_class::cgnat: return "cgnat";
    case address_class::multicast: return "multicast";
    case address_class::unspecified: return "unspecified";
    case address_class::reserved: return "reserved";
  }
  return "reserved";
}

address_class classify(const ip::address_v4& a) noexcept {
  std::uint32_t value = a.to_uint();
  for (const auto& block : v4_blocks)
    if (in_prefix(value, block.network, block.prefix)) return block.cls;
  return address_class::global;
}

address_class classify(const ip::address_v6& a) noexcept {
  static const std::array<v6_block, 8> blocks{{
      {v6_net("64:ff9b:1::"), 48, address_class::reserved},  // local-use NAT64: offset unknown
      {v6_net("2001:db8::"), 32, address_class::reserved},   // documentation
      {v6_net("2001::"), 23, address_class::reserved},       // IETF protocol assignments
      {v6_net("3fff::"), 20, address_class::reserved},       // documentation (RFC 9637)
      {v6_net("fc00::"), 7, address_class::private_use},     // unique local
      {v6_net("fec0::"), 10, address_class::private_use},    // site-local (deprecated)
      {v6_net("fe80::"), 10, address_class::link_local},
      {v6_net("ff00::"), 8, address_class::multicast},
  }};
  auto b = a.to_bytes();
  if (a.is_unspecified()) return address_class::unspecified;
  if (a.is_loopback()) return address_class::loopback;
  if (auto inner = embedded_v4(b)) return classify(*inner);
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {  // Teredo 2001:0::/32
    auto client = classify(v4_at(b, 12, true));
    return client != address_class::global ? client : classify(v4_at(b, 4));
  }
  for (const auto& block : blocks)
    if (bytes_prefix_equal(b, block.network, block.prefix)) return block.cls;
  // Global unicast is allocated from 2000::/3 only; the rest of the space is not for us.
  if ((b[0] & 0xe0) != 0x20) return address_class::reserved;
  return address_class::global;
}

address_class classify(const ip::address& a) noexcept {
  return a.is_v4() ? classify(a.to_v4()) : classify(a.to_v6());
}

bool cidr::contains(const ip::address& a) const noexcept {
  if (a.is_v4() != network.is_v4()) return false;
  if (a.is_v4()) {
    auto net = network.to_v4().to_uint();
    return in_prefix(a.to_v4().to_uint(), net, prefix_length);
  }
  return bytes_prefix_equal(a.to_v6().to_bytes(), network.to_v6().to_bytes(), prefix_length);
}

std::string cidr::to_string() const { return network.to_string() + "/" + std::to_string(prefix_length); }

result<cidr> parse_cidr(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos)
    return make_error(errc::invalid_argument, "address range '" + std::string(text) + "' needs a /prefix length");
  std::string addr_text(text.substr(0, slash));
  auto len_text = text.substr(slash + 1);
  boost::system::error_code ec;
  // make_address is inet_pton: one strict spelling per address, no "0x7f.1".
  auto addr = ip::make_address(addr_text, ec);
  if (ec || (addr.is_v6() && addr.to_v6().scope_id() != 0))
    return make_error(errc::invalid_argument, "address range '" + std::string(text) + "' has a bad address");
  unsigned max = addr.is_v4() ? 32 : 128;
  unsigned len = 0;
  auto [end, err] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
  if (len_text.empty() || len_text.size() > 3 || err != std::errc{} || end != len_text.data() + len_text.size() ||
      len > max)
    return make_error(errc::invalid_argument, "address range '" + std::string(text) + "' has a bad prefix length");
  if (host_bits_set(addr, len))
    return make_error(errc::invalid_argument,
                      "address range '" + std::string(text) + "' has host bits set after the prefix");
  return cidr{addr, len};
}

result<std::vector<cidr>> parse_cidr_list(std::string_view text) {
  std::vector<cidr> out;
  while (!text.empty()) {
    auto comma = text.find(',');
    auto one = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    if (one.empty()) continue;
    auto range = parse_cidr(one);
    if (!range) return std::move(range).err();
    out.push_back(*range);
  }
  return out;
}

egress_policy::egress_policy(std::vector<cidr> allowed_ranges) : allowed_ranges_(std::move(allowed_ranges)) {}

std::optional<std::string> egress_policy::refuse_reason(const ip::address& a) const {
  auto cls = classify(a);
  if (cls == address_class::global) return std::nullopt;
  std::optional<ip::address> mapped;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) mapped = ip::make_address_v4(ip::v4_mapped, a.to_v6());
  for (const auto& range : allowed_ranges_)
    if (range.contains(a) || (mapped && range.contains(*mapped))) return std::nullopt;
  return a.to_string() + " is " + std::string(to_string(cls));
}

}  // namespace sandfort::proxy
