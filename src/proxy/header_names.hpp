#pragma once
// Header names as HTTP compares them, for the proxy's rewriting of heads (wire.cpp, injection.cpp,
// session.cpp): case-folded, and the hop-by-hop ones a Connection header names.

#include <boost/beast/http/field.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace sandfort::proxy::detail {

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Optional whitespace (RFC 9110 5.6.3) off both ends.
inline std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The names a head's Connection headers list (lowercase): hop-by-hop for this message.
template <class Head>
std::vector<std::string> connection_tokens(const Head& head) {
  namespace bhttp = boost::beast::http;
  std::vector<std::string> out;
  for (auto it = head.find(bhttp::field::connection); it != head.end() && it->name() == bhttp::field::connection;
       ++it) {
    std::string_view rest = it->value();
    while (!rest.empty()) {
      auto comma = rest.find(',');
      out.push_back(ascii_lower(trim_ows(rest.substr(0, comma))));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  return out;
}

// The body is relayed as it came, so its framing headers are kept even when Connection names
// them: dropping them would have the body read as the next message.
inline bool is_framing(std::string_view lowered) {
  return lowered == "content-length" || lowered == "transfer-encoding";
}

}  // namespace sandfort::proxy::detail
