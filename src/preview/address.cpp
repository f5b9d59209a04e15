#include "sandfort/preview/address.hpp"

#include <algorithm>
#include <cctype>

#include "sandfort/crypto/digest.hpp"
#include "sandfort/core/ids.hpp"

namespace sandfort::preview {

namespace {

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void drop_trailing_dot(std::string& name) {
  if (!name.empty() && name.back() == '.') name.pop_back();
}

// "8080": one spelling per port (no leading zeros, which also rules out 0), so one port has
// one host name.
std::optional<unsigned short> parse_port(std::string_view digits) {
  if (!all_digits(digits) || digits.size() > 5 || digits.front() == '0') return std::nullopt;
  unsigned long value = std::stoul(std::string(digits));
  if (value > 65535) return std::nullopt;
  return static_cast<unsigned short>(value);
}

}  // namespace

std::optional<preview_address> parse_host(std::string_view host_header, std::string_view domain) {
  std::string host = lowercase(host_header);
  // The listener's port is whatever the client dialled: it only has to be a number.
  if (auto colon = host.rfind(':'); colon != std::string::npos) {
    std::string_view listener(host.data() + colon + 1, host.size() - colon - 1);
    if (!all_digits(listener) || listener.size() > 5) return std::nullopt;
    host.resize(colon);
  }
  drop_trailing_dot(host);
  std::string zone = lowercase(domain);
  drop_trailing_dot(zone);
  if (zone.empty() || host.size() <= zone.size() + 1) return std::nullopt;
  std::size_t label_size = host.size() - zone.size() - 1;
  if (host.compare(label_size + 1, std::string::npos, zone) != 0 || host[label_size] != '.') return std::nullopt;

  std::string_view label(host.data(), label_size);
  auto dash = label.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto port = parse_port(label.substr(0, dash));
  std::string_view id = label.substr(dash + 1);
  // A dot left in the id (more labels than one) fails here too.
  if (!port || !is_id(id, "sbx-")) return std::nullopt;
  return preview_address{*port, std::string(id)};
}

std::string make_token(std::string_view key, std::string_view sandbox_id, unsigned short port) {
  std::string message = std::string(sandbox_id) + ":" + std::to_string(port);
  return hmac_sha256_hex(key, message);
}

std::string url_template(std::string_view domain, std::string_view sandbox_id, unsigned short listener_port) {
  std::string url = "http://{port}-" + std::string(sandbox_id) + "." + std::string(domain);
  if (listener_port != 80) url += ":" + std::to_string(listener_port);
  return url;
}

std::string url_for(std::string_view domain, std::string_view sandbox_id, unsigned short port,
                    unsigned short listener_port) {
  std::string url = url_template(domain, sandbox_id, listener_port);
  return url.replace(url.find("{port}"), 6, std::to_string(port));
}

std::string link_for(std::string url, std::string_view token) {
  if (token.empty()) return url;
  auto scheme = url.find("://");
  auto authority = scheme == std::string::npos ? 0 : scheme + 3;
  if (url.find('/', authority) == std::string::npos) {
    auto query = url.find('?', authority);
    url.insert(query == std::string::npos ? url.size() : query, "/");
  }
  // Hex: nothing to escape.
  url += (url.find('?') == std::string::npos ? "?" : "&");
  return url + "sandfort_token=" + std::string(token);
}

}  // namespace sandfort::preview
