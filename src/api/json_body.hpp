#pragma once
// Reading request bodies: malformed JSON and wrongly typed fields become invalid_argument
// errors that name the field.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/http/message.hpp"
#include "sandfort/sandbox/types.hpp"

namespace sandfort::api {

// An empty body reads as {} so that optional-only requests need no body.
result<nlohmann::json> parse_object(std::string_view body);
inline result<nlohmann::json> parse_object(const http::request& req) { return parse_object(req.body()); }

// Each reader leaves `out` untouched when the field is absent (or null) and returns an error
// when it is present with the wrong type.
result<void> read(const nlohmann::json& j, const char* key, std::string& out);
result<void> read(const nlohmann::json& j, const char* key, bool& out);
result<void> read(const nlohmann::json& j, const char* key, std::optional<std::int64_t>& out);
result<void> read(const nlohmann::json& j, const char* key, std::optional<double>& out);
result<void> read(const nlohmann::json& j, const char* key, std::optional<std::string>& out);
result<void> read(const nlohmann::json& j, const char* key, std::vector<std::string>& out);
result<void> read(const nlohmann::json& j, const char* key, std::map<std::string, std::string>& out);
// For PATCH, where "absent" and "set to empty" differ.
result<void> read(const nlohmann::json& j, const char* key, std::optional<std::vector<std::string>>& out);
result<void> read(const nlohmann::json& j, const char* key, std::optional<std::map<std::string, std::string>>& out);

// Query parameters that must be non-negative integers.
result<std::optional<std::int64_t>> query_int(const http::context& ctx, const char* key);

// ?limit= (1-1000, default 100) and ?cursor= of a list of named resources (volumes, snapshots).
result<sandbox::name_page_request> parse_name_page(const http::context& ctx);

}  // namespace sandfort::api
