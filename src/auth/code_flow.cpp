#include "sandfort/auth/code_flow.hpp"

#include <algorithm>
#include <cctype>

#include "sandfort/core/base64.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::auth::code_flow {

namespace {

bool is_unreserved(unsigned char c) {
  return std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~';
}

std::string percent_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (is_unreserved(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

bool is_port(std::string_view p) {
  return !p.empty() && p.size() <= 5 && std::all_of(p.begin(), p.end(), [](unsigned char c) { return std::isdigit(c); });
}

// A Host header's value as RFC 9110 allows it, narrowed to what a redirect URI can carry as it is:
// a DNS name or IPv4 address, or an IPv6 literal in brackets, and an optional port.
bool is_host_header(std::string_view h) {
  if (h.empty() || h.size() > 255) return false;
  std::string_view host = h;
  std::string_view port;
  if (h.front() == '[') {
    auto close = h.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    auto inside = h.substr(1, close - 1);
    if (!std::all_of(inside.begin(), inside.end(), [](unsigned char c) { return std::isxdigit(c) || c == ':' || c == '.'; }))
      return false;
    auto after = h.substr(close + 1);
    if (after.empty()) return true;
    return after.front() == ':' && is_port(after.substr(1));
  }
  if (auto colon = h.find(':'); colon != std::string_view::npos) {
    host = h.substr(0, colon);
    port = h.substr(colon + 1);
    if (!is_port(port)) return false;
  }
  return !host.empty() && host.front() != '.' && host.front() != '-' &&
         std::all_of(host.begin(), host.end(), [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '-'; });
}

}  // namespace

bool is_code_verifier(std::string_view verifier) {
  return verifier.size() >= 43 && verifier.size() <= 128 &&
         std::all_of(verifier.begin(), verifier.end(), [](unsigned char c) { return is_unreserved(c); });
}

std::string pkce_challenge(std::string_view verifier) { return base64url_encode(sha256_bytes(verifier)); }

std::string form_encode(const fields& f) {
  std::string out;
  for (const auto& [name, value] : f) {
    if (!out.empty()) out.push_back('&');
    out += percent_encode(name);
    out.push_back('=');
    out += percent_encode(value);
  }
  return out;
}

result<std::string> with_query(std::string_view endpoint, const fields& f) {
  if (endpoint.find('#') != std::string_view::npos)
    return invalid_argument("the authorization endpoint has a fragment");
  std::string out(endpoint);
  if (f.empty()) return out;
  const bool has_query = out.find('?') != std::string::npos;
  if (!has_query) out.push_back('?');
  else if (out.back() != '?' && out.back() != '&') out.push_back('&');
  return out + form_encode(f);
}

std::string basic_credentials(std::string_view client_id, std::string_view client_secret) {
  return "Basic " + base64_encode(percent_encode(client_id) + ":" + percent_encode(client_secret));
}

result<std::string> console_origin(std::string_view public_url, std::string_view host_header, bool tls) {
  if (!public_url.empty()) return std::string(public_url);
  if (!is_host_header(host_header)) return invalid_argument("the request's Host header is not a host name");
  std::string host(host_header);
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::string(tls ? "https://" : "http://") + host;
}

std::string issuer_key(std::string_view issuer) { return sha256_hex(issuer).substr(0, 16); }

std::string host_of(std::string_view url) {
  auto start = url.find("://");
  std::string_view rest = start == std::string_view::npos ? url : url.substr(start + 3);
  return std::string(rest.substr(0, rest.find_first_of("/?#")));
}

}  // namespace sandfort::auth::code_flow
