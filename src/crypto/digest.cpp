#include "sandfort/crypto/digest.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdexcept>

#include "sandfort/core/ids.hpp"

namespace sandfort {

namespace {

// Fetched once: with EVP_sha256() OpenSSL 3 looks the algorithm up in its providers on every call
// (an "implicit fetch", locks included), which costs more than hashing a short text (every audit
// event's seal is one).
const EVP_MD* sha256_md() {
  static EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return fetched != nullptr ? fetched : EVP_sha256();
}

}  // namespace

std::string sha256_bytes(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, sha256_md(), nullptr) != 1)
    throw std::runtime_error("EVP_Digest(sha256) failed");
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string sha256_hex(std::string_view data) { return to_hex(sha256_bytes(data)); }

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (!HMAC(sha256_md(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), digest, &size))
    throw std::runtime_error("HMAC(sha256) failed");
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest), size));
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace sandfort
