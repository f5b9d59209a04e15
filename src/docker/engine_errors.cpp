#include "engine_errors.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace sandfort::docker::detail {

namespace {

constexpr std::size_t max_raw_body = 300;
constexpr std::size_t max_logged = 1000;

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

// Text from outside (a registry may write anything) made safe for one log line.
std::string loggable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, max_logged)) out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c);
  if (s.size() > max_logged) out += "...";
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

std::string_view words_of_status(unsigned status) {
  switch (status) {
    case 400: return "refused the request";
    case 404: return "not found";
    case 409: return "conflict";
    case 502:
    case 503:
    case 504: return "unavailable";
    default: return "engine error";
  }
}

template <std::size_t N>
bool mentions(const std::string& text, const std::array<std::string_view, N>& markers) {
  return std::any_of(markers.begin(), markers.end(),
                     [&](std::string_view m) { return text.find(m) != std::string::npos; });
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
  auto e = make_error(class_of_status(status), std::string(what) + ": Docker answered HTTP " + std::to_string(status) +
                                                   " (" + std::string(words_of_status(status)) + ")");
  auto level = status >= 500 ? spdlog::level::warn : spdlog::level::info;
  spdlog::log(level, "docker: {}: HTTP {}: {}", loggable(what), status, loggable(engine_message(body)));
  return e;
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

std::string_view to_string(pull_failure f) noexcept {
  switch (f) {
    case pull_failure::not_found: return "not found";
    case pull_failure::unauthorized: return "unauthorized";
    case pull_failure::registry_unreachable: return "registry unreachable";
    case pull_failure::timed_out: return "timed out";
    case pull_failure::docker_unreachable: return "Docker unreachable";
    case pull_failure::invalid_reference: return "invalid reference";
    case pull_failure::registry_error: return "registry error";
  }
  return "registry error";
}

pull_failure classify_pull_failure(std::string_view reason) {
  // Order matters: Docker Hub answers "pull access denied ... does not exist" for a missing
  // repository, and a transport timeout reads "Docker is unreachable at …: no answer … within".
  static constexpr std::array<std::string_view, 7> absent = {
      "not found",    "manifest unknown", "repository does not exist", "pull access denied",
      "name unknown", "no such image",    "does not exist",
  };
  static constexpr std::array<std::string_view, 5> timeout = {"timeout", "timed out", "deadline exceeded",
                                                              "no answer from", "context canceled"};
  static constexpr std::array<std::string_view, 5> auth = {"unauthorized", "authentication required", "denied",
                                                           "forbidden", "no basic auth credentials"};
  static constexpr std::array<std::string_view, 11> unreachable = {
      "connection refused", "no such host",  "dial tcp",    "network is unreachable", "no route to host",
      "connection reset",   "http response to https client", "tls:", "x509", "certificate", "server misbehaving"};
  auto r = lower(reason);
  if (r.rfind("docker is unreachable", 0) == 0)
    return mentions(r, timeout) ? pull_failure::timed_out : pull_failure::docker_unreachable;
  if (r.find("invalid reference format") != std::string::npos) return pull_failure::invalid_reference;
  if (mentions(r, absent)) return pull_failure::not_found;
  if (mentions(r, timeout)) return pull_failure::timed_out;
  if (mentions(r, auth)) return pull_failure::unauthorized;
  if (mentions(r, unreachable)) return pull_failure::registry_unreachable;
  return pull_failure::registry_error;
}

error pull_error(std::string_view ref, std::string_view reason) {
  auto cls = classify_pull_failure(reason);
  errc code = errc::unavailable;
  if (cls == pull_failure::not_found) code = errc::not_found;
  if (cls == pull_failure::unauthorized) code = errc::permission_denied;
  if (cls == pull_failure::invalid_reference) code = errc::invalid_argument;
  spdlog::warn("docker: pull of image \"{}\" failed ({}): {}", loggable(ref), to_string(cls), loggable(reason));
  return make_error(code, "image \"" + std::string(ref) + "\" could not be pulled: " + std::string(to_string(cls)) +
                              " (details in sandfortd's log)");
}

}  // namespace sandfort::docker::detail
