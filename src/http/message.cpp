#include "sandfort/http/message.hpp"

namespace sandfort::http {

response json_response(unsigned status, const nlohmann::json& body) {
  response res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::content_type, "application/json");
  // Output from sandboxes is arbitrary bytes: never let invalid UTF-8 throw here.
  res.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  res.prepare_payload();
  return res;
}

response empty_response(unsigned status) {
  response res{static_cast<bhttp::status>(status), 11};
  res.prepare_payload();
  return res;
}

response error_response(const error& e, const std::string& request_id) {
  nlohmann::json body = {
      {"error", {{"code", to_string(e.code)}, {"message", e.message}, {"request_id", request_id}}}};
  auto res = json_response(static_cast<unsigned>(http_status(e.code)), body);
  if (e.retry_after_s > 0) res.set(bhttp::field::retry_after, std::to_string(e.retry_after_s));
  return res;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else if (s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

void split_target(std::string_view target, std::string& path, std::map<std::string, std::string>& query) {
  auto q = target.find('?');
  path = std::string(target.substr(0, q));
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    auto eq = pair.find('=');
    std::string key = percent_decode(pair.substr(0, eq));
    std::string value = eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1));
    if (!key.empty()) query[key] = value;
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
}

}  // namespace sandfort::http
