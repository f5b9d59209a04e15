#include "wire.hpp"

#include "header_names.hpp"

#include <algorithm>
#include <array>
#include <boost/beast/http/status.hpp>

namespace sandfort::proxy::detail {

namespace {

constexpr std::size_t max_log_value = 200;

// Headers for this hop only (RFC 9110 7.6.1) and the proxy's own; Host is rewritten from the URI.
bool dropped(std::string_view lowered) {
  static constexpr std::array<std::string_view, 8> names{"connection", "keep-alive", "proxy-authorization",
                                                         "proxy-authenticate", "proxy-connection", "te",
                                                         "upgrade", "host"};
  return std::find(names.begin(), names.end(), lowered) != names.end();
}


// Printable ASCII without spaces (a space would start a new key=value); anything else → '?'.
std::string log_token(std::string_view s) {
  if (s.empty()) return "-";
  std::string out;
  for (char c : s.substr(0, max_log_value)) out.push_back(c > 0x20 && c < 0x7f ? c : '?');
  return out;
}

// Inside quotes: spaces are fine, quotes and backslashes are escaped.
std::string log_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, max_log_value)) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  return out + "\"";
}

}  // namespace

std::string deny_response(int status, std::string_view message, std::string_view why) {
  auto printable = [](std::string_view text) {
    std::string out;
    for (char c : text) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
    return out;
  };
  std::string body = printable(message) + "\n";
  std::string reason(bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status))));
  if (!why.empty()) reason += " (" + printable(why) + ")";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  out += "Content-Type: text/plain; charset=utf-8\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "Connection: close\r\n";
  if (status == 407) out += "Proxy-Authenticate: Basic realm=\"sandfort\"\r\n";
  out += "\r\n";
  return out + body;
}

std::optional<std::string> head_scanner::scan(std::string_view received) {
  for (; !end_ && next_ < received.size(); ++next_) {
    char c = received[next_];
    bool last = next_ + 1 == received.size();
    if (c == '\r') {
      if (last) break;  // judged when the next byte arrives
      if (received[next_ + 1] != '\n') return "bare CR in the request head";
    } else if (c == '\n') {
      if (next_ == 0 || received[next_ - 1] != '\r') return "bare LF in the request head";
      if (next_ >= 3 && received.substr(next_ - 3, 4) == "\r\n\r\n") {
        end_ = next_ + 1;
        break;
      }
      if (last) break;  // the next line's first byte decides
      if (received[next_ + 1] == ' ' || received[next_ + 1] == '\t') return "folded header line (obs-fold)";
    } else if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) {
      return "control character in the request head";
    }
  }
  return std::nullopt;
}

bool header_values_clean(const bhttp::request_header<>& head) {
  for (const auto& field : head)
    for (char c : field.value())
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return false;
  return true;
}

std::string forward_head(const bhttp::request_header<>& head, const egress_target& target) {
  auto named = connection_tokens(head);
  std::string out(head.method_string());
  out += " " + target.origin_target + (head.version() == 10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
  out += "Host: " + target.host_header + "\r\n";
  for (const auto& field : head) {
    auto name = ascii_lower(field.name_string());
    if (dropped(name)) continue;
    if (!is_framing(name) && std::find(named.begin(), named.end(), name) != named.end()) continue;
    out += std::string(field.name_string()) + ": " + std::string(field.value()) + "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

std::string response_head_for_client(const bhttp::response_header<>& head, bool keep_alive) {
  auto named = connection_tokens(head);
  std::string out = "HTTP/1.1 " + std::to_string(head.result_int()) + " " + std::string(head.reason()) + "\r\n";
  for (const auto& field : head) {
    auto name = ascii_lower(field.name_string());
    if (name == "connection" || name == "keep-alive" || name == "proxy-connection") continue;
    if (!is_framing(name) && std::find(named.begin(), named.end(), name) != named.end()) continue;
    out += std::string(field.name_string()) + ": " + std::string(field.value()) + "\r\n";
  }
  if (!keep_alive) out += "Connection: close\r\n";
  return out + "\r\n";
}

int response_status(std::string_view start) {
  if (start.size() < 12 || !start.starts_with("HTTP/1.") || start[8] != ' ') return 0;
  int status = 0;
  for (std::size_t i = 9; i < 12; ++i) {
    if (start[i] < '0' || start[i] > '9') return 0;
    status = status * 10 + (start[i] - '0');
  }
  return status;
}

std::string decision_line(const egress_event& ev) {
  return "egress sandbox=" + log_token(ev.sandbox_id) + " org=" + log_token(ev.org_id) + " host=" +
         log_token(ev.host) + " port=" + std::to_string(ev.port) + " decision=" + log_token(ev.decision) +
         " reason=" + log_quoted(ev.reason) + " status=" + std::to_string(ev.status) +
         " bytes_in=" + std::to_string(ev.bytes_in) + " bytes_out=" + std::to_string(ev.bytes_out) +
         " duration_ms=" + std::to_string(ev.duration.count()) + " address=" + log_token(ev.address);
}

}  // namespace sandfort::proxy::detail
