#include "console_csrf.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>
#include <string_view>

namespace sandfort::api {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string header(const http::bhttp::fields& h, std::string_view name) {
  auto it = h.find(name);
  return it == h.end() ? std::string() : std::string(it->value());
}

// Whether Origin ("http://host:port", no path) names the host the request was sent to (Host).
bool same_origin(const std::string& origin, const std::string& host) {
  auto scheme_end = origin.find("://");
  if (scheme_end == std::string::npos || host.empty()) return false;
  std::string_view scheme(origin.data(), scheme_end);
  if (scheme != "http" && scheme != "https") return false;
  std::string_view authority = std::string_view(origin).substr(scheme_end + 3);
  if (authority.find('/') != std::string_view::npos) return false;
  return lower(authority) == lower(host);
}

bool equal_in_constant_time(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

result<void> console_request_allowed(http::verb method, const http::bhttp::fields& h, const std::string& csrf) {
  const bool websocket = lower(header(h, "Upgrade")) == "websocket";
  const bool reads = (method == http::verb::get || method == http::verb::head) && !websocket;
  if (reads) return {};
  if (!same_origin(header(h, "Origin"), header(h, "Host")))
    return make_error(errc::permission_denied,
                      "a console session's request that changes something must come from the console's own page "
                      "(its Origin header must name this host)");
  if (websocket) return {};  // a browser cannot add a header to a WebSocket; the Origin is its proof
  if (csrf.empty() || !equal_in_constant_time(header(h, "X-Sandfort-CSRF"), csrf))
    return make_error(errc::permission_denied,
                      "a console session's request that changes something needs its X-Sandfort-CSRF token");
  return {};
}

}  // namespace sandfort::api
