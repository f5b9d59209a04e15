#include "sandfort/api/client_address.hpp"

#include <boost/asio/ip/address.hpp>

namespace sandfort::api {

namespace {

// Hops of X-Forwarded-For looked at, from the right: a chain of trusted proxies is short, and a
// header of thousands of entries costs no more than this.
constexpr int max_hops = 16;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "203.0.113.9", "2001:db8::1", "[2001:db8::1]:443" or "203.0.113.9:443" as one canonical
// address (IPv4-mapped IPv6 as IPv4); empty when it is none of these.
std::string canonical(std::string_view entry) {
  std::string text(entry);
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) return {};
    text = text.substr(1, close - 1);
  } else if (auto colon = text.find(':'); colon != std::string::npos && text.find(':', colon + 1) == std::string::npos) {
    text = text.substr(0, colon);  // IPv4 with a port
  }
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(text, ec);
  if (ec) return {};
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    a = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  return a.to_string();
}

}  // namespace

client_addresses::client_addresses(std::vector<proxy::cidr> trusted_proxies) : trusted_(std::move(trusted_proxies)) {}

void client_addresses::relay_opened(unsigned short local_port, const std::string& client) {
  relays_[local_port] = client;
}

void client_addresses::relay_closed(unsigned short local_port) { relays_.erase(local_port); }

bool client_addresses::trusted(const std::string& address) const {
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(address, ec);
  if (ec) return false;
  for (const auto& range : trusted_)
    if (range.contains(a)) return true;
  return false;
}

std::string client_addresses::connection_source(const http::peer& from) const {
  std::string client = resolve(from, {});
  return trusted(client) ? std::string() : client;
}

std::string client_addresses::resolve(const http::peer& from, std::string_view forwarded_for) const {
  std::string client = canonical(from.address);
  if (client.empty()) return from.address;  // "unix"
  // Only a loopback connection can be the front's: it dials 127.0.0.1 from the registered port,
  // and no other socket can hold that port while the relay does.
  if (client == "127.0.0.1")
    if (auto relay = relays_.find(from.port); relay != relays_.end()) client = relay->second;

  int hops = 0;
  while (!forwarded_for.empty() && trusted(client) && hops++ < max_hops) {
    auto comma = forwarded_for.rfind(',');
    std::string_view last = trim(comma == std::string_view::npos ? forwarded_for : forwarded_for.substr(comma + 1));
    forwarded_for = comma == std::string_view::npos ? std::string_view{} : forwarded_for.substr(0, comma);
    std::string hop = canonical(last);
    // A hop the proxy wrote that is not an address: who is behind it is unknown, and the proxy
    // is the last address known for sure.
    if (hop.empty()) break;
    client = hop;
  }
  return client;
}

}  // namespace sandfort::api
