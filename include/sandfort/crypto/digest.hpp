#pragma once
// Digests for secrets: API keys and proxy credentials are stored only as SHA-256; preview
// tokens are HMACs under a per-sandbox key. Comparisons of secrets take constant time.

#include <string>
#include <string_view>

namespace sandfort {

// SHA-256(data): its 32 bytes, and their lowercase hex.
std::string sha256_bytes(std::string_view data);
std::string sha256_hex(std::string_view data);
// Lowercase hex of HMAC-SHA-256(key, data).
std::string hmac_sha256_hex(std::string_view key, std::string_view data);
// Equal strings, in time that depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

}  // namespace sandfort
