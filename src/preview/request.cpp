#include "sandfort/preview/request.hpp"

#include "sandfort/http/message.hpp"

namespace sandfort::preview {

namespace {

// Calls fn(piece) for each piece of s between separators, empty ones included.
template <typename Fn>
void for_each_piece(std::string_view s, char separator, Fn fn) {
  for (std::size_t start = 0;;) {
    auto end = s.find(separator, start);
    fn(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return;
    start = end + 1;
  }
}

}  // namespace

query_split take_query_parameter(std::string_view target, std::string_view name) {
  query_split out;
  auto question = target.find('?');
  out.target = std::string(target.substr(0, question));
  if (question == std::string_view::npos) return out;
  std::string kept;
  for_each_piece(target.substr(question + 1), '&', [&](std::string_view pair) {
    auto equals = pair.find('=');
    std::string key = http::percent_decode(pair.substr(0, equals));
    if (key != name) {
      kept += (kept.empty() ? "" : "&") + std::string(pair);
      return;
    }
    out.value = equals == std::string_view::npos ? std::string() : http::percent_decode(pair.substr(equals + 1));
  });
  if (!kept.empty()) out.target += "?" + kept;
  return out;
}

}  // namespace sandfort::preview
