#include "sandfort/secrets/sealing.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>
#include <stdexcept>

#include "sandfort/core/base64.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/core/private_file.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::secrets {

namespace {

constexpr std::size_t nonce_size = 12;
constexpr std::size_t tag_size = 16;
constexpr std::string_view sealed_prefix = "v1.";

using cipher_ctx_ptr = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

private_file secrets_key_file(const std::string& path) {
  return {.path = path, .label = "secrets key file", .max_size = 1024, .follow_links = false};
}

const unsigned char* bytes_of(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

result<sealing_key> parse_key_text(std::string text, const std::string& path) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  auto raw = from_hex(text);
  if (!raw || raw->size() != key_size)
    return make_error(errc::invalid_argument,
                      "secrets key file " + path + " does not hold a key (64 hexadecimal characters, 32 bytes)");
  return sealing_key::from_bytes(*raw);
}

result<sealing_key> load_key_file(const std::string& path) {
  auto text = read_private_file(secrets_key_file(path));
  if (!text) return std::move(text).err();
  return parse_key_text(std::move(*text), path);
}

}  // namespace

result<sealing_key> sealing_key::from_bytes(std::string_view raw) {
  if (raw.size() != key_size) return make_error(errc::invalid_argument, "a secrets key is 32 bytes");
  std::array<unsigned char, key_size> k{};
  std::memcpy(k.data(), raw.data(), key_size);
  return sealing_key(k);
}

sealing_key sealing_key::generate() {
  std::array<unsigned char, key_size> k{};
  if (RAND_bytes(k.data(), static_cast<int>(k.size())) != 1) throw std::runtime_error("RAND_bytes failed");
  return sealing_key(k);
}

result<sealing_key> sealing_key::load_or_create(const std::string& path) {
  if (!nothing_at(path)) return load_key_file(path);
  const auto fresh = generate();
  const std::string_view raw(reinterpret_cast<const char*>(fresh.key_.data()), fresh.key_.size());
  auto installed = install_private_file(secrets_key_file(path), to_hex(raw) + "\n");
  if (!installed) return std::move(installed).err();
  if (!*installed) return load_key_file(path);
  return fresh;
}

std::string sealing_key::seal(std::string_view plaintext, std::string_view aad) const {
  unsigned char nonce[nonce_size];
  if (RAND_bytes(nonce, sizeof nonce) != 1) throw std::runtime_error("RAND_bytes failed");
  cipher_ctx_ptr ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  std::string out(nonce_size + plaintext.size() + tag_size, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  std::memcpy(o, nonce, nonce_size);
  int len = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(nonce_size), nullptr) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, key_.data(), nonce) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, bytes_of(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), o + nonce_size, &len, bytes_of(plaintext), static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), o + nonce_size + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag_size),
                          o + nonce_size + plaintext.size()) != 1)
    throw std::runtime_error("AES-256-GCM sealing failed");
  return std::string(sealed_prefix) + base64_encode(out);
}

result<std::string> sealing_key::open(std::string_view sealed, std::string_view aad) const {
  const auto refused = [] { return make_error(errc::invalid_argument, "sealed value does not open with this key"); };
  if (sealed.substr(0, sealed_prefix.size()) != sealed_prefix) return refused();
  auto raw = base64_decode(sealed.substr(sealed_prefix.size()));
  if (!raw || raw->size() < nonce_size + tag_size) return refused();
  const auto* in = bytes_of(*raw);
  const std::size_t text_size = raw->size() - nonce_size - tag_size;
  std::string out(text_size, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  cipher_ctx_ptr ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0;
  unsigned char tag[tag_size];
  std::memcpy(tag, in + nonce_size + text_size, tag_size);
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(nonce_size), nullptr) != 1 ||
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, key_.data(), in) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, bytes_of(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), o, &len, in + nonce_size, static_cast<int>(text_size)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(tag_size), tag) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), o + len, &len) != 1) {
    OPENSSL_cleanse(out.data(), out.size());
    return refused();
  }
  return out;
}

std::string sealing_key::key_id() const {
  std::string material = "sandfort secrets key";
  material.append(reinterpret_cast<const char*>(key_.data()), key_.size());
  auto id = sha256_hex(material).substr(0, 16);
  OPENSSL_cleanse(material.data(), material.size());
  return id;
}

std::string value_aad(std::string_view org_id, std::string_view name) {
  // Lengths first: ("a", "bc") and ("ab", "c") must differ.
  return "sandfort-secret-value/" + std::to_string(org_id.size()) + ":" + std::string(org_id) + "/" +
         std::to_string(name.size()) + ":" + std::string(name);
}

std::string ca_key_aad(std::string_view org_id) {
  return "sandfort-interception-ca-key/" + std::to_string(org_id.size()) + ":" + std::string(org_id);
}

}  // namespace sandfort::secrets
