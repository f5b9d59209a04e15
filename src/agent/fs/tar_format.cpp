#include "fs/tar_format.hpp"

#include <cstring>

namespace sandfort::agent::fs::tar {

std::string_view text(const char* header, field f) {
  const char* begin = header + f.offset;
  const void* nul = std::memchr(begin, '\0', f.width);
  return {begin, nul ? static_cast<std::size_t>(static_cast<const char*>(nul) - begin) : f.width};
}

std::optional<std::uint64_t> number(const char* header, field f) {
  const auto* p = reinterpret_cast<const unsigned char*>(header + f.offset);
  if (p[0] & 0x80) {
    if (p[0] & 0x40) return std::nullopt;  // negative
    std::uint64_t v = p[0] & 0x3f;
    for (std::size_t i = 1; i < f.width; ++i) {
      if (v >> 56) return std::nullopt;  // overflows 64 bits
      v = (v << 8) | p[i];
    }
    return v;
  }
  std::size_t i = 0;
  while (i < f.width && (p[i] == ' ' || p[i] == '\0')) ++i;
  std::uint64_t v = 0;
  bool any = false;
  for (; i < f.width && p[i] != ' ' && p[i] != '\0'; ++i) {
    if (p[i] < '0' || p[i] > '7') return std::nullopt;
    if (v >> 61) return std::nullopt;
    v = v * 8 + static_cast<std::uint64_t>(p[i] - '0');
    any = true;
  }
  if (!any) return 0;  // an empty field is zero, as GNU tar reads it
  return v;
}

bool checksum_ok(const char* header) {
  auto stored = number(header, checksum);
  if (!stored) return false;
  std::uint64_t unsigned_sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < block; ++i) {
    bool in_field = i >= checksum.offset && i < checksum.offset + checksum.width;
    unsigned char u = in_field ? ' ' : static_cast<unsigned char>(header[i]);
    signed char s = in_field ? ' ' : static_cast<signed char>(header[i]);
    unsigned_sum += u;
    signed_sum += s;
  }
  return *stored == unsigned_sum || static_cast<std::int64_t>(*stored) == signed_sum;
}

bool all_zero(const char* header) {
  for (std::size_t i = 0; i < block; ++i)
    if (header[i] != 0) return false;
  return true;
}

bool fits_octal(field f, std::uint64_t value) {
  std::size_t digits = f.width - 1;
  return digits >= 21 || value < (std::uint64_t{1} << (3 * digits));
}

void put_number(char* header, field f, std::uint64_t value) {
  char* p = header + f.offset;
  if (fits_octal(f, value)) {
    std::size_t digits = f.width - 1;
    for (std::size_t i = digits; i-- > 0;) {
      p[i] = static_cast<char>('0' + (value & 7));
      value >>= 3;
    }
    p[digits] = '\0';
    return;
  }
  std::memset(p, 0, f.width);
  for (std::size_t i = f.width; i-- > 1;) {
    p[i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  p[0] = static_cast<char>(0x80);
}

void put_text(char* header, field f, std::string_view value) {
  if (value.empty()) return;  // its data() may be null, which memcpy must not get
  std::memcpy(header + f.offset, value.data(), value.size() < f.width ? value.size() : f.width);
}

void seal(char* header) {
  std::memset(header + checksum.offset, ' ', checksum.width);
  unsigned sum = 0;
  for (std::size_t i = 0; i < block; ++i) sum += static_cast<unsigned char>(header[i]);
  // Six octal digits, NUL, space: the traditional layout every reader accepts.
  char* p = header + checksum.offset;
  for (std::size_t i = 6; i-- > 0;) {
    p[i] = static_cast<char>('0' + (sum & 7));
    sum >>= 3;
  }
  p[6] = '\0';
  p[7] = ' ';
}

void append_pax_record(std::string& out, std::string_view key, std::string_view value) {
  std::size_t body = 1 + key.size() + 1 + value.size() + 1;  // ' ' key '=' value '\n'
  std::size_t len = body + 1;
  while (std::to_string(len).size() + body != len) len = std::to_string(len).size() + body;
  out += std::to_string(len);
  out += ' ';
  out += key;
  out += '=';
  out += value;
  out += '\n';
}

}  // namespace sandfort::agent::fs::tar
