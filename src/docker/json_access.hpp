#pragma once
// Reading Docker's JSON defensively: a field that is absent or of another type reads as empty,
// never as an exception (the engine's answers vary across API versions).

#include <nlohmann/json.hpp>
#include <string>

namespace sandfort::docker::detail {

inline const nlohmann::json& member(const nlohmann::json& j, const char* key) {
  static const nlohmann::json null_json;
  if (!j.is_object()) return null_json;
  auto it = j.find(key);
  return it == j.end() ? null_json : *it;
}

inline std::string string_of(const nlohmann::json& j) { return j.is_string() ? j.get<std::string>() : std::string{}; }

}  // namespace sandfort::docker::detail
