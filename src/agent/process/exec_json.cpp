#include "process/exec_json.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

namespace sandfort::agent {
namespace {

using nlohmann::json;

constexpr std::int64_t max_timeout_ms = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t max_output_cap = std::int64_t{1} << 30;


result<std::int64_t> integer_in(const json& v, const char* name, std::int64_t low, std::int64_t high) {
  std::string range = std::string(name) + " must be an integer between " + std::to_string(low) + " and " +
                      std::to_string(high);
  if (!v.is_number_integer()) return invalid_argument(range);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(high)) return invalid_argument(range);
  auto n = v.get<std::int64_t>();
  if (n < low || n > high) return invalid_argument(range);
  return n;
}

result<std::vector<std::string>> parse_argv(const json& v) {
  if (!v.is_array() || v.empty()) return invalid_argument("argv must be a non-empty array of strings");
  std::vector<std::string> argv;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return invalid_argument("argv[" + std::to_string(i) + "] must be a string");
    argv.push_back(v[i].get<std::string>());
  }
  return argv;
}

result<void> parse_program(const json& j, exec_request& req) {
  bool has_argv = j.contains("argv");
  bool has_command = j.contains("command");
  if (has_argv && has_command) return invalid_argument("give exactly one of argv and command, not both");
  if (!has_argv && !has_command) return invalid_argument("give exactly one of argv and command");
  if (has_argv) {
    auto argv = parse_argv(j["argv"]);
    if (!argv) return std::move(argv).err();
    req.argv = std::move(*argv);
    return {};
  }
  const json& command = j["command"];
  if (!command.is_string()) return invalid_argument("command must be a string");
  if (command.get_ref<const std::string&>().empty()) return invalid_argument("command must not be empty");
  req.argv = {"/bin/sh", "-c", command.get<std::string>()};
  return {};
}

result<void> parse_options(const json& j, exec_call& call) {
  exec_request& req = call.request;
  if (j.contains("cwd")) {
    if (!j["cwd"].is_string()) return invalid_argument("cwd must be a string");
    req.cwd = j["cwd"].get<std::string>();
  }
  if (j.contains("env")) {
    auto env = parse_env(j["env"]);
    if (!env) return std::move(env).err();
    req.env = std::move(*env);
  }
  if (j.contains("stdin")) {
    if (!j["stdin"].is_string()) return invalid_argument("stdin must be a string");
    req.stdin_data = j["stdin"].get<std::string>();
  }
  if (j.contains("timeout_ms")) {
    auto ms = integer_in(j["timeout_ms"], "timeout_ms", 1, max_timeout_ms);
    if (!ms) return std::move(ms).err();
    req.timeout = std::chrono::milliseconds(*ms);
  }
  if (j.contains("max_output_bytes")) {
    auto cap = integer_in(j["max_output_bytes"], "max_output_bytes", 0, max_output_cap);
    if (!cap) return std::move(cap).err();
    req.max_output_bytes = static_cast<std::size_t>(*cap);
  }
  if (j.contains("binary")) {
    if (!j["binary"].is_boolean()) return invalid_argument("binary must be a boolean");
    call.binary = j["binary"].get<bool>();
  }
  return {};
}

}  // namespace

result<exec_call> parse_exec_call(std::string_view body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    if (auto bracket = what.find("] "); bracket != std::string::npos) what = what.substr(bracket + 2);
    return invalid_argument("request body is not valid JSON: " + what);
  }
  if (!j.is_object()) return invalid_argument("request body must be a JSON object");
  static const std::array<std::string_view, 8> known = {"argv",       "command",          "cwd",   "env",
                                                         "stdin",      "timeout_ms",       "binary",
                                                         "max_output_bytes"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) return invalid_argument("unknown field '" + key + "'");
  }
  exec_call call;
  if (auto p = parse_program(j, call.request); !p) return std::move(p).err();
  if (auto o = parse_options(j, call); !o) return std::move(o).err();
  return call;
}

void hold_to_limits(exec_request& req, std::chrono::milliseconds max_timeout, std::size_t output_cap) {
  req.timeout = std::min(req.timeout, max_timeout);
  req.max_output_bytes = std::min(req.max_output_bytes, output_cap);
}

json to_json(const exec_result& r, bool binary) {
  json j = {{"exit_code", r.exit_code},
            {"stdout", r.stdout_data},
            {"stderr", r.stderr_data},
            {"duration_ms", r.duration.count()},
            {"timed_out", r.timed_out},
            {"truncated", r.truncated}};
  if (r.oom_killed) j["oom_killed"] = *r.oom_killed;
  if (binary) {
    j["stdout_b64"] = base64_encode(r.stdout_data);
    j["stderr_b64"] = base64_encode(r.stderr_data);
  }
  return j;
}

result<std::map<std::string, std::string>> parse_env(const nlohmann::json& v) {
  if (!v.is_object()) return invalid_argument("env must be an object of strings");
  std::map<std::string, std::string> env;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) return invalid_argument("env." + key + " must be a string");
    env[key] = value.get<std::string>();
  }
  return env;
}

result<nlohmann::json> parse_object(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return json::object();
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (auto bracket = what.find("] "); bracket != std::string::npos) what = what.substr(bracket + 2);
    return invalid_argument("request body is not valid JSON: " + what);
  }
  if (!j.is_object()) return invalid_argument("request body must be a JSON object");
  return j;
}

result<void> check_fields(const nlohmann::json& j, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) return invalid_argument("unknown field '" + key + "'");
  }
  return {};
}


}  // namespace sandfort::agent
