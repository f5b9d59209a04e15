#include "pty/wire.hpp"

#include <charconv>
#include <nlohmann/json.hpp>

namespace sandfort::agent::pty {
namespace {

using nlohmann::json;

constexpr unsigned max_dimension = 1000;


result<unsigned short> parse_dimension(const std::map<std::string, std::string>& query, const std::string& name,
                                       unsigned short fallback) {
  auto it = query.find(name);
  if (it == query.end()) return fallback;
  const std::string& text = it->second;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < 1 || value > max_dimension)
    return invalid_argument(name + " must be an integer from 1 to " + std::to_string(max_dimension) + ", not '" + text + "'");
  return static_cast<unsigned short>(value);
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

result<unsigned short> json_dimension(const json& msg, const char* name) {
  auto it = msg.find(name);
  if (it == msg.end() || !it->is_number_integer())
    return invalid_argument(std::string("resize needs an integer ") + name);
  auto value = it->get<long long>();
  if (value < 1 || value > max_dimension)
    return invalid_argument(std::string(name) + " must be from 1 to " + std::to_string(max_dimension));
  return static_cast<unsigned short>(value);
}

}  // namespace

result<terminal_spec> parse_query(const std::map<std::string, std::string>& query) {
  terminal_spec spec;
  auto cols = parse_dimension(query, "cols", spec.size.cols);
  if (!cols) return std::move(cols).err();
  auto rows = parse_dimension(query, "rows", spec.size.rows);
  if (!rows) return std::move(rows).err();
  spec.size = {*cols, *rows};
  if (auto it = query.find("command"); it != query.end() && !it->second.empty()) {
    if (has_nul(it->second)) return invalid_argument("command contains a NUL byte");
    spec.argv = {"/bin/sh", "-c", it->second};
  }
  if (auto it = query.find("cwd"); it != query.end() && !it->second.empty()) {
    if (has_nul(it->second)) return invalid_argument("cwd contains a NUL byte");
    spec.cwd = it->second;
  }
  return spec;
}

result<resize_request> parse_control(std::string_view text) {
  json msg = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded() || !msg.is_object()) return invalid_argument("a text frame must be a JSON control message");
  auto type = msg.find("type");
  if (type == msg.end() || !type->is_string()) return invalid_argument("a control message needs a string \"type\"");
  if (*type != "resize") return invalid_argument("unknown control message type '" + type->get<std::string>() + "'");
  auto cols = json_dimension(msg, "cols");
  if (!cols) return std::move(cols).err();
  auto rows = json_dimension(msg, "rows");
  if (!rows) return std::move(rows).err();
  return resize_request{{*cols, *rows}};
}

std::string exit_message(int exit_code) { return json{{"type", "exit"}, {"exit_code", exit_code}}.dump(); }

std::string error_message(std::string_view what) {
  return json{{"type", "error"}, {"message", what}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace sandfort::agent::pty
