#pragma once
// The Ed25519 key that signs audit checkpoints. It lives in a file outside the database, so whoever
// can rewrite the database still cannot sign a checkpoint for the rewritten chain.

#include <memory>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace sandfort::audit {

class signing_key {
 public:
  // Loads the PEM (PKCS#8) private key at path, or creates one there with mode 0600 whatever the
  // umask (written to a temporary file, then linked into place, so a crash never leaves half a
  // key and a concurrent start never replaces one). Refuses, with the reason: a file that is not
  // a regular file, not owned by this process's user, or accessible to group or others; anything
  // but an unencrypted Ed25519 key. The directory must exist.
  static result<signing_key> load_or_create(const std::string& path);
  // The same checks, but never creates: not_found when there is no file at path. For readers
  // (audit-verify) that must not leave a fresh key where the operator's key was expected.
  static result<signing_key> load(const std::string& path);

  std::string public_key_pem() const;  // SubjectPublicKeyInfo, "-----BEGIN PUBLIC KEY-----"
  // First 16 hex characters of SHA-256 of the 32-byte raw public key.
  std::string key_id() const;
  // Standard base64 (padded) of the 64-byte Ed25519 signature of message.
  std::string sign(std::string_view message) const;

 private:
  explicit signing_key(std::shared_ptr<evp_pkey_st> key);
  std::shared_ptr<evp_pkey_st> key_;
  std::string key_id_;
};

class public_key {
 public:
  // An Ed25519 public key in PEM (SubjectPublicKeyInfo); invalid_argument for anything else.
  static result<public_key> from_pem(std::string_view pem);

  std::string key_id() const { return key_id_; }
  // True when signature_b64 (strict standard base64 of 64 bytes) is this key's signature of message.
  bool verify(std::string_view message, std::string_view signature_b64) const;

 private:
  explicit public_key(std::shared_ptr<evp_pkey_st> key);
  std::shared_ptr<evp_pkey_st> key_;
  std::string key_id_;
};

}  // namespace sandfort::audit
