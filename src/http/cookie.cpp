#include "sandfort/http/cookie.hpp"

namespace sandfort::http {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

cookie_split take_cookie(std::string_view cookie_header, std::string_view name) {
  cookie_split out;
  while (true) {
    auto semi = cookie_header.find(';');
    std::string_view pair = trim(cookie_header.substr(0, semi));
    if (!pair.empty()) {
      auto equals = pair.find('=');
      if (trim(pair.substr(0, equals)) != name) {
        out.rest += (out.rest.empty() ? "" : "; ") + std::string(pair);
      } else {
        std::string_view value = equals == std::string_view::npos ? std::string_view() : trim(pair.substr(equals + 1));
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
        out.values.emplace_back(value);
      }
    }
    if (semi == std::string_view::npos) return out;
    cookie_header.remove_prefix(semi + 1);
  }
}

}  // namespace sandfort::http
