#pragma once
// Keys, JWKs and signatures for the auth tests, made with OpenSSL directly: independent of the
// code under test, so a bug in it cannot cancel out in the test.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sandfort/core/base64.hpp"

namespace sandfort::testing::jwt_support {

using nlohmann::json;

using pkey_ptr = std::shared_ptr<EVP_PKEY>;

inline std::string b64url(std::string_view in) { return base64url_encode(in); }

inline pkey_ptr own(EVP_PKEY* k) {
  REQUIRE(k != nullptr);
  return pkey_ptr(k, EVP_PKEY_free);
}
inline pkey_ptr rsa_key(std::size_t bits) { return own(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", bits)); }
inline pkey_ptr ec_key() { return own(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")); }
inline pkey_ptr ed_key() { return own(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519")); }

// A big-endian BIGNUM parameter of a key, left-padded to `width` bytes when width > 0.
inline std::string bn_param(const pkey_ptr& k, const char* name, int width = 0) {
  BIGNUM* bn = nullptr;
  REQUIRE(EVP_PKEY_get_bn_param(k.get(), name, &bn) == 1);
  std::string out(static_cast<std::size_t>(width > 0 ? width : BN_num_bytes(bn)), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size()));
  BN_free(bn);
  return out;
}

inline json rsa_jwk(const pkey_ptr& k, const std::string& kid) {
  return {{"kty", "RSA"}, {"kid", kid}, {"use", "sig"}, {"n", b64url(bn_param(k, OSSL_PKEY_PARAM_RSA_N))},
          {"e", b64url(bn_param(k, OSSL_PKEY_PARAM_RSA_E))}};
}

inline json ec_jwk(const pkey_ptr& k, const std::string& kid) {
  return {{"kty", "EC"}, {"crv", "P-256"}, {"kid", kid},
          {"x", b64url(bn_param(k, OSSL_PKEY_PARAM_EC_PUB_X, 32))},
          {"y", b64url(bn_param(k, OSSL_PKEY_PARAM_EC_PUB_Y, 32))}};
}

inline json ed_jwk(const pkey_ptr& k, const std::string& kid) {
  std::string raw(32, '\0');
  std::size_t len = raw.size();
  REQUIRE(EVP_PKEY_get_raw_public_key(k.get(), reinterpret_cast<unsigned char*>(raw.data()), &len) == 1);
  return {{"kty", "OKP"}, {"crv", "Ed25519"}, {"kid", kid}, {"x", b64url(raw)}};
}

inline std::string public_pem(const pkey_ptr& k) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  REQUIRE(PEM_write_bio_PUBKEY(bio.get(), k.get()) == 1);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

// A raw signature as OpenSSL makes it (DER for ECDSA).
inline std::string openssl_sign(const pkey_ptr& k, const EVP_MD* md, std::string_view input) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  REQUIRE(EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, k.get()) == 1);
  const auto* in = reinterpret_cast<const unsigned char*>(input.data());
  std::size_t len = 0;
  REQUIRE(EVP_DigestSign(ctx.get(), nullptr, &len, in, input.size()) == 1);
  std::string sig(len, '\0');
  REQUIRE(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, in, input.size()) == 1);
  sig.resize(len);
  return sig;
}

inline std::string der_to_r_s(const std::string& der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  REQUIRE(sig != nullptr);
  std::string out(64, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(sig), reinterpret_cast<unsigned char*>(out.data()), 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(sig), reinterpret_cast<unsigned char*>(out.data()) + 32, 32);
  ECDSA_SIG_free(sig);
  return out;
}

using signer = std::function<std::string(std::string_view)>;

inline signer rs256_with(pkey_ptr k) { return [k](std::string_view in) { return openssl_sign(k, EVP_sha256(), in); }; }
inline signer es256_with(pkey_ptr k) {
  return [k](std::string_view in) { return der_to_r_s(openssl_sign(k, EVP_sha256(), in)); };
}
inline signer es256_der_with(pkey_ptr k) { return [k](std::string_view in) { return openssl_sign(k, EVP_sha256(), in); }; }
inline signer eddsa_with(pkey_ptr k) { return [k](std::string_view in) { return openssl_sign(k, nullptr, in); }; }
inline signer hs256_with(std::string secret) {
  return [secret](std::string_view in) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    REQUIRE(HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                 reinterpret_cast<const unsigned char*>(in.data()), in.size(), mac, &len) != nullptr);
    return std::string(reinterpret_cast<const char*>(mac), len);
  };
}

inline std::string compact_raw(const std::string& header_text, const std::string& payload_text, const signer& sign) {
  const std::string input = b64url(header_text) + "." + b64url(payload_text);
  return input + "." + b64url(sign(input));
}

}  // namespace sandfort::testing::jwt_support
