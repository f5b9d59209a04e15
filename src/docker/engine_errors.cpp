#include "engine_errors.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>

namespace sandfort::docker::detail {

namespace {

constexpr std::size_t max_raw_body = 300;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string string_at(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// The reason one line of a pull stream reports, or "" for a progress line.
std::string line_error(std::string_view line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return {};
  if (auto e = string_at(j, "error"); !e.empty()) return e;
  if (auto it = j.find("errorDetail"); it != j.end())
    if (auto m = string_at(*it, "message"); !m.empty()) return m;
  return {};
}

errc class_of_status(unsigned status) {
  switch (status) {
    case 400: return errc::invalid_argument;
    case 404: return errc::not_found;
    case 409: return errc::conflict;
    case 502:
    case 503:
    case 504: return errc::unavailable;
    default: return errc::internal;
  }
}

}  // namespace

std::string engine_message(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (auto m = string_at(j, "message"); !m.empty()) return m;
  auto raw = trim(body);
  if (raw.empty()) return "no details given";
  if (raw.size() > max_raw_body) return std::string(raw.substr(0, max_raw_body)) + "...";
  return std::string(raw);
}

error status_error(unsigned status, std::string_view body, std::string_view what) {
  return make_error(class_of_status(status), std::string(what) + ": " + engine_message(body) + " (Docker answered HTTP " +
                                                 std::to_string(status) + ")");
}

error transport_error(const std::string& socket_path, const error& cause) {
  return make_error(errc::unavailable, "Docker is unreachable at " + socket_path + ": " + cause.message +
                                           " (is the Docker daemon running, and may this user use its socket?)");
}

std::string pull_failure_reason(std::string_view stream) {
  while (!stream.empty()) {
    auto nl = stream.find('\n');
    auto line = trim(stream.substr(0, nl));
    stream = nl == std::string_view::npos ? std::string_view{} : stream.substr(nl + 1);
    if (line.empty()) continue;
    if (auto reason = line_error(line); !reason.empty()) return reason;
  }
  return {};
}

error pull_error(std::string_view ref, std::string_view reason) {
  static constexpr std::array<std::string_view, 7> absent_markers = {
      "not found",          "manifest unknown", "repository does not exist", "pull access denied",
      "name unknown",       "no such image",    "does not exist",
  };
  auto r = lower(reason);
  bool absent = std::any_of(absent_markers.begin(), absent_markers.end(),
                            [&](std::string_view m) { return r.find(m) != std::string::npos; });
  return make_error(absent ? errc::not_found : errc::unavailable,
                    "image \"" + std::string(ref) + "\" could not be pulled: " + std::string(reason));
}

}  // namespace sandfort::docker::detail
