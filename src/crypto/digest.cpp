#include "sandfort/crypto/digest.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdexcept>

#include "sandfort/core/ids.hpp"

namespace sandfort {

std::string sha256_bytes(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("EVP_Digest(sha256) failed");
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string sha256_hex(std::string_view data) { return to_hex(sha256_bytes(data)); }

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), digest, &size))
    throw std::runtime_error("HMAC(sha256) failed");
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest), size));
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace sandfort
