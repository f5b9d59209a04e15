#include "sandfort/http/stream.hpp"

namespace sandfort::http {

std::string sse_event(std::string_view event, std::string_view data) {
  std::string out = "event: ";
  out.append(event);
  out.push_back('\n');
  std::size_t start = 0;
  while (true) {
    auto nl = data.find('\n', start);
    out += "data: ";
    out.append(data.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    out.push_back('\n');
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out.push_back('\n');
  return out;
}

bool wants_event_stream(const bhttp::request_header<>& header) {
  auto it = header.find(bhttp::field::accept);
  return it != header.end() && it->value().find("text/event-stream") != boost::beast::string_view::npos;
}

}  // namespace sandfort::http
