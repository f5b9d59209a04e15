#pragma once
// Sealing of organization secrets at rest (docs/secrets.md): AES-256-GCM under a 32-byte key kept
// in a file outside the database (secrets.key_file), a fresh random 96-bit nonce per seal, and
// associated data that binds a sealed value to its place (organization and secret name), so a
// row copied to another organization or renamed does not open.
//
// A sealed value is one string: "v1." + base64(nonce ‖ ciphertext ‖ 16-byte tag).

#include <array>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"

namespace sandfort::secrets {

constexpr std::size_t key_size = 32;

class sealing_key {
 public:
  // The raw 32 bytes; invalid_argument for any other length.
  static result<sealing_key> from_bytes(std::string_view raw);
  // 32 bytes from the system's random source (tests, and a new key file).
  static sealing_key generate();

  // Loads the key file at path (64 lowercase hex characters and an optional newline), or creates
  // one with mode 0600 whatever the umask (a temporary file linked into place: a crash never leaves
  // half a key, a concurrent start never replaces one). Refuses, with a message saying what to do:
  // not a regular file, not owned by this process's user, accessible to group or others (0644 is
  // refused: `chmod 600`), anything but 32 hex-encoded bytes. The directory must exist.
  static result<sealing_key> load_or_create(const std::string& path);

  // AES-256-GCM of plaintext with a random nonce, associated data `aad`.
  std::string seal(std::string_view plaintext, std::string_view aad) const;
  // The plaintext, or invalid_argument when the value was not sealed by this key with this
  // associated data (tampered, truncated, another key, another place).
  result<std::string> open(std::string_view sealed, std::string_view aad) const;

  // Which key this is, without revealing it: the first 16 hex of SHA-256("sandfort secrets key" ‖ key).
  std::string key_id() const;

 private:
  explicit sealing_key(const std::array<unsigned char, key_size>& k) : key_(k) {}
  std::array<unsigned char, key_size> key_{};
};

// The associated data of an organization's secret value: org id and name, unambiguous.
std::string value_aad(std::string_view org_id, std::string_view name);
// The associated data of an organization's interception CA private key.
std::string ca_key_aad(std::string_view org_id);

}  // namespace sandfort::secrets
