#pragma once
// Base64 (RFC 4648), one implementation for every module. Decoding is strict — no whitespace, no
// characters of the other alphabet, zero leftover bits — so one value has exactly one encoding
// (a signature cannot be re-encoded into a second valid token or record).

#include <optional>
#include <string>
#include <string_view>

namespace sandfort {

// Standard alphabet, padded (section 4).
std::string base64_encode(std::string_view bytes);
// Standard alphabet; padding required, '=' only at the end. The empty string decodes to "".
std::optional<std::string> base64_decode(std::string_view text);
// URL-safe alphabet without padding (section 5), as JWS and JWK use it.
std::string base64url_encode(std::string_view bytes);
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace sandfort
