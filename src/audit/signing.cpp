#include "sandfort/audit/signing.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <stdexcept>

#include "sandfort/core/base64.hpp"
#include "sandfort/core/private_file.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::audit {

namespace {

constexpr std::size_t max_pem_size = 64 * 1024;
constexpr std::size_t signature_size = 64;

using bio_ptr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

std::shared_ptr<evp_pkey_st> adopt(EVP_PKEY* key) { return {key, EVP_PKEY_free}; }

private_file signing_key_file(const std::string& path) {
  return {.path = path, .label = "signing key file", .max_size = max_pem_size, .follow_links = true};
}

std::string key_id_of(EVP_PKEY* key) {
  unsigned char raw[32];
  std::size_t size = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key, raw, &size) != 1) throw std::runtime_error("EVP_PKEY_get_raw_public_key failed");
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(raw), size)).substr(0, 16);
}

bool is_ed25519(EVP_PKEY* key) { return key != nullptr && EVP_PKEY_get_id(key) == EVP_PKEY_ED25519; }

// Never prompt on a terminal for the passphrase of an encrypted key: such a key is refused.
int no_passphrase(char*, int, int, void*) { return -1; }

std::string private_key_pem(EVP_PKEY* key) {
  bio_ptr bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    throw std::runtime_error("PEM_write_bio_PrivateKey failed");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

result<std::shared_ptr<evp_pkey_st>> load_private_key(const std::string& path) {
  auto pem = read_private_file(signing_key_file(path));
  if (!pem) return std::move(pem).err();
  bio_ptr bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())), BIO_free);
  auto key = adopt(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr) : nullptr);
  ERR_clear_error();
  if (!is_ed25519(key.get()))
    return make_error(errc::invalid_argument,
                      "signing key file " + path + " does not hold an unencrypted Ed25519 private key (PEM PKCS#8)");
  return key;
}

result<std::shared_ptr<evp_pkey_st>> create_private_key(const std::string& path) {
  auto key = adopt(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!key) throw std::runtime_error("Ed25519 key generation failed");
  auto installed = install_private_file(signing_key_file(path), private_key_pem(key.get()));
  if (!installed) return std::move(installed).err();
  if (!*installed) return load_private_key(path);
  return key;
}

}  // namespace

signing_key::signing_key(std::shared_ptr<evp_pkey_st> key) : key_(std::move(key)), key_id_(key_id_of(key_.get())) {}

result<signing_key> signing_key::load_or_create(const std::string& path) {
  auto key = nothing_at(path) ? create_private_key(path) : load_private_key(path);
  if (!key) return std::move(key).err();
  return signing_key(std::move(*key));
}

result<signing_key> signing_key::load(const std::string& path) {
  if (nothing_at(path))
    return make_error(errc::not_found, "signing key file " + path + " does not exist");
  auto key = load_private_key(path);
  if (!key) return std::move(key).err();
  return signing_key(std::move(*key));
}

std::string signing_key::public_key_pem() const {
  bio_ptr bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key_.get()) != 1) throw std::runtime_error("PEM_write_bio_PUBKEY failed");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

std::string signing_key::key_id() const { return key_id_; }

std::string signing_key::sign(std::string_view message) const {
  md_ctx_ptr ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char signature[signature_size];
  std::size_t size = sizeof signature;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), signature, &size, reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) != 1)
    throw std::runtime_error("Ed25519 signing failed");
  return base64_encode(std::string_view(reinterpret_cast<const char*>(signature), size));
}

public_key::public_key(std::shared_ptr<evp_pkey_st> key) : key_(std::move(key)), key_id_(key_id_of(key_.get())) {}

result<public_key> public_key::from_pem(std::string_view pem) {
  if (pem.size() > max_pem_size) return make_error(errc::invalid_argument, "public key PEM is too large");
  bio_ptr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  auto key = adopt(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, no_passphrase, nullptr) : nullptr);
  ERR_clear_error();
  if (!is_ed25519(key.get())) return make_error(errc::invalid_argument, "not an Ed25519 public key in PEM");
  return public_key(std::move(key));
}

bool public_key::verify(std::string_view message, std::string_view signature_b64) const {
  const auto signature = base64_decode(signature_b64);
  if (!signature || signature->size() != signature_size) return false;
  md_ctx_ptr ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) == 1 &&
                  EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature->data()),
                                   signature->size(), reinterpret_cast<const unsigned char*>(message.data()),
                                   message.size()) == 1;
  ERR_clear_error();
  return ok;
}

}  // namespace sandfort::audit
