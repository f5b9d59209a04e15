#pragma once
// The canonical JSON writer behind audit events and checkpoints; its rules are spelled out in
// include/sandfort/audit/chain.hpp.

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sandfort/core/error.hpp"

namespace sandfort::audit::detail {

// JavaScript numbers hold integers exactly only up to 2^53 - 1.
inline constexpr std::int64_t max_safe_integer = (std::int64_t{1} << 53) - 1;

bool valid_utf8(std::string_view s) noexcept;
// s with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD.
std::string repair_utf8(std::string_view s);

// v written canonically, or invalid_argument (float, unsafe integer, invalid UTF-8, too deep).
result<std::string> canonical_dump(const nlohmann::json& v);
// Appends s as a canonical JSON string; false (nothing appended) when s is not valid UTF-8.
bool append_string(std::string& out, std::string_view s);

// details parsed and checked: a JSON object that has a canonical form.
result<nlohmann::json> parse_details(std::string_view details);

}  // namespace sandfort::audit::detail
