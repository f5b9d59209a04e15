#pragma once
// Strict base64url (RFC 4648 section 5) as JWS and JWK use it: no padding, no whitespace, no
// characters from plain base64, and zero leftover bits, so that one value has one encoding and
// a signature cannot be re-encoded into a second valid token.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandfort::auth::jwt::detail {

inline int base64url_sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

inline std::optional<std::string> base64url_decode(std::string_view in) {
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() / 4 * 3 + 2);
  std::uint32_t bits = 0;
  int count = 0;
  for (char c : in) {
    const int v = base64url_sextet(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xffu));
      bits &= (1u << count) - 1u;
    }
  }
  if (bits != 0) return std::nullopt;
  return out;
}

}  // namespace sandfort::auth::jwt::detail
