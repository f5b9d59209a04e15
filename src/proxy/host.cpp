// Host names: normalization, the allowlist and "host:port" (declared in policy.hpp).
#include "sandfort/proxy/policy.hpp"

#include <boost/asio/ip/address_v6.hpp>
#include <cctype>
#include <charconv>

namespace sandfort::proxy {

namespace {

// A name as DNS spells it (the trailing dot of an absolute name included), at most 253 + 1.
constexpr std::size_t max_host_length = 254;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_';
}

bool entry_matches(std::string_view entry_raw, const std::string& host) {
  if (entry_raw == "*") return true;
  auto entry = normalize_host(entry_raw);
  if (entry.size() > 2 && entry.starts_with("*.") && entry.find('*', 1) == std::string::npos) {
    std::string_view suffix = std::string_view(entry).substr(1);  // ".example.com"
    return host.size() > suffix.size() && host.ends_with(suffix);
  }
  if (entry.find('*') != std::string::npos) return false;
  return !entry.empty() && entry == host;
}

std::optional<unsigned short> parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  unsigned value = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) return std::nullopt;
  return static_cast<unsigned short>(value);
}

}  // namespace

std::string normalize_host(std::string_view host) {
  std::string out(host);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

bool host_allowed(const std::vector<std::string>& allowlist, std::string_view host) {
  auto normalized = normalize_host(host);
  if (normalized.empty()) return false;
  for (const auto& entry : allowlist)
    if (entry_matches(entry, normalized)) return true;
  return false;
}

result<authority> parse_authority(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return make_error(errc::invalid_argument, std::string(why));
  };
  authority out;
  std::string_view port_text;
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string_view::npos) return bad("unterminated '[' in the host");
    out.host = std::string(text.substr(1, close - 1));
    out.ipv6_literal = true;
    if (text.substr(close + 1).empty() || text[close + 1] != ':') return bad("a port is required (host:port)");
    port_text = text.substr(close + 2);
    boost::system::error_code ec;
    // Hex digits, ':' and '.' only, then inet_pton: no scope ids ("%eth0"), no names.
    for (char c : out.host)
      if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) return bad("bad IPv6 address");
    boost::asio::ip::make_address_v6(out.host, ec);
    if (ec) return bad("bad IPv6 address");
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("a port is required (host:port)");
    out.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    if (out.host.empty()) return bad("the host is empty");
    if (out.host.size() > max_host_length) return bad("the host name is too long");
    for (char c : out.host)
      if (!name_char(c)) return bad("the host has a character a host name cannot have");
    // Empty labels: ".x", "x..y", and "x.." (which normalize_host would read as "x.", and
    // host_allowed, normalizing again, as "x"). One trailing dot, an absolute name, is fine.
    if (out.host.starts_with('.') || out.host.find("..") != std::string::npos)
      return bad("the host has an empty label");
  }
  auto port = parse_port(port_text);
  if (!port) return bad("the port must be a number from 1 to 65535");
  out.port = *port;
  return out;
}

}  // namespace sandfort::proxy
