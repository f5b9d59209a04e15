#include "sandfort/core/ids.hpp"

#include <sys/random.h>

#include <stdexcept>

namespace sandfort {

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0x0f]);
  }
  return out;
}

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::size_t filled = 0;
  while (filled < bytes) {
    ssize_t n = ::getrandom(raw.data() + filled, bytes - filled, 0);
    if (n < 0) throw std::runtime_error("getrandom failed");
    filled += static_cast<std::size_t>(n);
  }
  return to_hex(raw);
}

std::string new_id(std::string_view prefix) { return std::string(prefix) + random_hex(8); }

bool is_id(std::string_view s, std::string_view prefix, std::size_t hex_chars) noexcept {
  if (s.size() != prefix.size() + hex_chars || s.substr(0, prefix.size()) != prefix) return false;
  for (char c : s.substr(prefix.size()))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace sandfort
