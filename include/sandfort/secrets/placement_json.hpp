#pragma once
// A secret's placement as JSON, the one spelling the API shows and the store keeps:
// {"type": "header", "header": "Authorization", "format": "Bearer {value}"},
// {"type": "query", "query": "api_key"}, {"type": "basic_auth", "username": "deploy"}.

#include <nlohmann/json.hpp>

#include "sandfort/secrets/types.hpp"

namespace sandfort::secrets {

inline nlohmann::json placement_json(const placement& p) {
  switch (p.type) {
    case placement::kind::query:
      return {{"type", "query"}, {"query", p.query}};
    case placement::kind::basic_auth:
      return {{"type", "basic_auth"}, {"username", p.username}};
    case placement::kind::header:
      break;
  }
  return {{"type", "header"}, {"header", p.header}, {"format", p.format}};
}

// What placement_json wrote (the store's own rows).
inline placement placement_from_json(const nlohmann::json& j) {
  placement p;
  const auto type = j.value("type", std::string("header"));
  if (type == "query") {
    p.type = placement::kind::query;
    p.query = j.value("query", std::string());
  } else if (type == "basic_auth") {
    p.type = placement::kind::basic_auth;
    p.username = j.value("username", std::string());
  } else {
    p.header = j.value("header", std::string());
    p.format = j.value("format", std::string("{value}"));
  }
  return p;
}

}  // namespace sandfort::secrets
