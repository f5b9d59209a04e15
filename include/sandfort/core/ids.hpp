#pragma once
// Identifiers and secrets from the kernel's CSPRNG (getrandom), hex-encoded so they are
// DNS-label safe (sandbox ids appear in preview host names).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sandfort {

// n random bytes as 2n lowercase hex characters.
std::string random_hex(std::size_t bytes);

// "sbx-" + 16 hex, "key-" + 16 hex, ...
std::string new_id(std::string_view prefix);

// True when s is prefix followed by exactly hex_chars lowercase hex characters.
bool is_id(std::string_view s, std::string_view prefix, std::size_t hex_chars = 16) noexcept;

std::string to_hex(std::string_view bytes);
// The bytes of an even-length hex string (either case); nullopt for anything else.
std::optional<std::string> from_hex(std::string_view hex);

}  // namespace sandfort
