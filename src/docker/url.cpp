#include "url.hpp"

namespace sandfort::docker::detail {

namespace {

bool unreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

}  // namespace

std::string percent_encode(std::string_view s, std::string_view keep) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (unreserved(c) || keep.find(c) != std::string_view::npos) {
      out.push_back(c);
    } else {
      auto u = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 0x0f]);
    }
  }
  return out;
}

std::string query_string(std::initializer_list<std::pair<std::string_view, std::string_view>> params) {
  std::string out;
  for (const auto& [key, value] : params) {
    out += out.empty() ? '?' : '&';
    out += percent_encode(key);
    out += '=';
    out += percent_encode(value);
  }
  return out;
}

}  // namespace sandfort::docker::detail
