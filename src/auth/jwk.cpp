// JWKs and JWKS documents into OpenSSL public keys, and the raw JWS signature check.
#include "sandfort/auth/jwt.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <algorithm>

#include "sandfort/core/base64.hpp"

namespace sandfort::auth::jwt {

namespace {

using json = nlohmann::json;

// Under 2048 bits is breakable in practice; over 16384 is no real key, only a slow one.
constexpr int min_rsa_bits = 2048;
constexpr int max_rsa_bits = 16384;
// OpenSSL refuses public exponents over 64 bits for large moduli; refuse them for all.
constexpr int max_rsa_exponent_bits = 64;
constexpr std::size_t p256_coordinate_bytes = 32;
constexpr std::size_t ed25519_key_bytes = 32;
constexpr std::size_t es256_signature_bytes = 64;

template <auto free_fn>
struct openssl_free {
  template <typename T>
  void operator()(T* p) const { free_fn(p); }
};
using bignum_ptr = std::unique_ptr<BIGNUM, openssl_free<BN_free>>;
using pkey_ctx_ptr = std::unique_ptr<EVP_PKEY_CTX, openssl_free<EVP_PKEY_CTX_free>>;
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, openssl_free<EVP_MD_CTX_free>>;
using param_bld_ptr = std::unique_ptr<OSSL_PARAM_BLD, openssl_free<OSSL_PARAM_BLD_free>>;
using params_ptr = std::unique_ptr<OSSL_PARAM, openssl_free<OSSL_PARAM_free>>;
using ecdsa_sig_ptr = std::unique_ptr<ECDSA_SIG, openssl_free<ECDSA_SIG_free>>;
using shared_pkey = std::shared_ptr<EVP_PKEY>;


const unsigned char* bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

// A string member holding base64url; nullopt when absent, not a string or not base64url.
std::optional<std::string> member_bytes(const json& jwk, const char* name) {
  const auto it = jwk.find(name);
  if (it == jwk.end() || !it->is_string()) return std::nullopt;
  return base64url_decode(it->get_ref<const std::string&>());
}

bool member_is(const json& jwk, const char* name, std::string_view value) {
  const auto it = jwk.find(name);
  return it != jwk.end() && it->is_string() && it->get_ref<const std::string&>() == value;
}

bignum_ptr to_bignum(const std::string& big_endian) {
  return bignum_ptr(BN_bin2bn(bytes(big_endian), static_cast<int>(big_endian.size()), nullptr));
}

shared_pkey from_params(const char* type, OSSL_PARAM* params) {
  pkey_ctx_ptr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* pkey = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) {
    ERR_clear_error();
    return nullptr;
  }
  return shared_pkey(pkey, EVP_PKEY_free);
}

// An OpenSSL-side sanity check of the public key (for EC: the point is on the curve).
bool public_key_is_valid(EVP_PKEY* pkey) {
  pkey_ctx_ptr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, pkey, nullptr));
  const bool ok = ctx && EVP_PKEY_public_check(ctx.get()) == 1;
  if (!ok) ERR_clear_error();
  return ok;
}

result<shared_pkey> rsa_public_key(const json& jwk) {
  const auto n = member_bytes(jwk, "n");
  const auto e = member_bytes(jwk, "e");
  if (!n || !e || n->empty() || e->empty()) return unauthenticated("RSA key without valid n and e");
  // Leading zero octets are not allowed in n, but a bound before BN_bin2bn keeps the int cast safe.
  if (n->size() > max_rsa_bits / 8 + 1 || e->size() > max_rsa_exponent_bits / 8 + 1)
    return unauthenticated("RSA key too large");
  const bignum_ptr bn_n = to_bignum(*n);
  const bignum_ptr bn_e = to_bignum(*e);
  if (!bn_n || !bn_e) return unauthenticated("RSA key n or e unreadable");
  const int bits = BN_num_bits(bn_n.get());
  if (bits < min_rsa_bits) return unauthenticated("RSA key under 2048 bits");
  if (bits > max_rsa_bits) return unauthenticated("RSA key over 16384 bits");
  if (BN_num_bits(bn_e.get()) > max_rsa_exponent_bits || !BN_is_odd(bn_e.get()) || BN_is_one(bn_e.get()))
    return unauthenticated("RSA exponent is not acceptable");
  const param_bld_ptr bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
    ERR_clear_error();
    return unauthenticated("RSA key could not be built");
  }
  const params_ptr params(OSSL_PARAM_BLD_to_param(bld.get()));
  shared_pkey pkey = params ? from_params("RSA", params.get()) : nullptr;
  if (!pkey) return unauthenticated("RSA key could not be built");
  return pkey;
}

result<shared_pkey> ec_public_key(const json& jwk) {
  if (!member_is(jwk, "crv", "P-256")) return unauthenticated("EC key on a curve other than P-256");
  const auto x = member_bytes(jwk, "x");
  const auto y = member_bytes(jwk, "y");
  if (!x || !y || x->size() != p256_coordinate_bytes || y->size() != p256_coordinate_bytes)
    return unauthenticated("EC key without 32-byte x and y");
  std::string point = "\x04" + *x + *y;  // SEC 1 uncompressed form
  char group[] = "P-256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
      OSSL_PARAM_construct_end(),
  };
  shared_pkey pkey = from_params("EC", params);
  if (!pkey || !public_key_is_valid(pkey.get())) return unauthenticated("EC key is not a point on P-256");
  return pkey;
}

result<shared_pkey> okp_public_key(const json& jwk) {
  if (!member_is(jwk, "crv", "Ed25519")) return unauthenticated("OKP key on a curve other than Ed25519");
  auto x = member_bytes(jwk, "x");
  if (!x || x->size() != ed25519_key_bytes) return unauthenticated("Ed25519 key without 32-byte x");
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, x->data(), x->size()),
      OSSL_PARAM_construct_end(),
  };
  shared_pkey pkey = from_params("ED25519", params);
  if (!pkey) return unauthenticated("Ed25519 key could not be built");
  return pkey;
}

// use and key_ops say what a key is for; a key that says anything but verification is skipped.
result<void> check_purpose(const json& jwk) {
  const auto use = jwk.find("use");
  if (use != jwk.end() && !(use->is_string() && use->get_ref<const std::string&>() == "sig"))
    return unauthenticated("key is not for signatures (use)");
  const auto ops = jwk.find("key_ops");
  if (ops != jwk.end() && !(ops->is_array() && std::find(ops->begin(), ops->end(), json("verify")) != ops->end()))
    return unauthenticated("key is not for verification (key_ops)");
  return ok_t{};
}

result<std::optional<algorithm>> declared_alg(const json& jwk) {
  const auto it = jwk.find("alg");
  if (it == jwk.end()) return std::optional<algorithm>{};
  const auto a = it->is_string() ? parse_algorithm(it->get_ref<const std::string&>()) : std::nullopt;
  if (!a) return unauthenticated("key alg is not RS256, ES256 or EdDSA");
  return a;
}

struct typed_pkey {
  key_type type;
  shared_pkey pkey;
};

result<typed_pkey> public_key(const json& jwk) {
  const auto kty = jwk.find("kty");
  if (kty == jwk.end() || !kty->is_string()) return unauthenticated("key without kty");
  const auto& name = kty->get_ref<const std::string&>();
  struct builder {
    const char* kty;
    key_type type;
    result<shared_pkey> (*build)(const json&);
  };
  static constexpr builder builders[] = {
      {"RSA", key_type::rsa, rsa_public_key},
      {"EC", key_type::ec_p256, ec_public_key},
      {"OKP", key_type::ed25519, okp_public_key},
  };
  for (const auto& b : builders) {
    if (name != b.kty) continue;
    auto pkey = b.build(jwk);
    if (!pkey) return std::move(pkey).err();
    return typed_pkey{b.type, std::move(pkey).value()};
  }
  return unauthenticated("unsupported kty");
}

// ES256 signatures are r||s, 32 bytes each (RFC 7518 section 3.4); OpenSSL verifies DER.
std::optional<std::string> ecdsa_der(std::string_view r_s) {
  const ecdsa_sig_ptr sig(ECDSA_SIG_new());
  bignum_ptr r(BN_bin2bn(bytes(r_s), static_cast<int>(p256_coordinate_bytes), nullptr));
  bignum_ptr s(BN_bin2bn(bytes(r_s.substr(p256_coordinate_bytes)), static_cast<int>(p256_coordinate_bytes), nullptr));
  if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r.get(), s.get()) != 1) return std::nullopt;
  r.release();  // owned by sig now
  s.release();
  const int size = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (size <= 0) return std::nullopt;
  std::string der(static_cast<std::size_t>(size), '\0');
  auto* out = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig.get(), &out) != size) return std::nullopt;
  return der;
}

}  // namespace

std::optional<algorithm> parse_algorithm(std::string_view name) {
  if (name == "RS256") return algorithm::rs256;
  if (name == "ES256") return algorithm::es256;
  if (name == "EdDSA") return algorithm::eddsa;
  return std::nullopt;
}

std::string_view to_string(algorithm a) {
  switch (a) {
    case algorithm::rs256: return "RS256";
    case algorithm::es256: return "ES256";
    case algorithm::eddsa: return "EdDSA";
  }
  return "unknown";
}

std::string_view to_string(key_type t) {
  switch (t) {
    case key_type::rsa: return "RSA";
    case key_type::ec_p256: return "EC P-256";
    case key_type::ed25519: return "OKP Ed25519";
  }
  return "unknown";
}

key::key(std::string kid, key_type type, std::optional<algorithm> alg, std::shared_ptr<evp_pkey_st> pkey)
    : kid_(std::move(kid)), type_(type), alg_(alg), pkey_(std::move(pkey)) {}

result<key> key::from_jwk(const nlohmann::json& jwk) {
  if (!jwk.is_object()) return unauthenticated("key is not a JSON object");
  const auto kid = jwk.find("kid");
  if (kid == jwk.end() || !kid->is_string() || kid->get_ref<const std::string&>().empty())
    return unauthenticated("key without kid");
  if (auto purpose = check_purpose(jwk); !purpose) return std::move(purpose).err();
  auto alg = declared_alg(jwk);
  if (!alg) return std::move(alg).err();
  auto pkey = public_key(jwk);
  if (!pkey) return std::move(pkey).err();
  key k(kid->get<std::string>(), pkey->type, *alg, std::move(pkey->pkey));
  if (k.alg_ && !k.fits(*k.alg_)) return unauthenticated("key alg does not fit its kty");
  return k;
}

bool key::fits(algorithm a) const {
  switch (a) {
    case algorithm::rs256: return type_ == key_type::rsa;
    case algorithm::es256: return type_ == key_type::ec_p256;
    case algorithm::eddsa: return type_ == key_type::ed25519;
  }
  return false;
}

bool key::verify_signature(algorithm a, std::string_view signing_input, std::string_view signature) const {
  if (!pkey_ || !fits(a)) return false;
  std::string der;
  if (a == algorithm::es256) {
    if (signature.size() != es256_signature_bytes) return false;
    auto converted = ecdsa_der(signature);
    if (!converted) {
      ERR_clear_error();
      return false;
    }
    der = std::move(*converted);
    signature = der;
  }
  // EdDSA signs the message itself (no digest); the others sign its SHA-256.
  const EVP_MD* md = a == algorithm::eddsa ? nullptr : EVP_sha256();
  const md_ctx_ptr ctx(EVP_MD_CTX_new());
  const bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, pkey_.get()) == 1 &&
                  EVP_DigestVerify(ctx.get(), bytes(signature), signature.size(), bytes(signing_input),
                                   signing_input.size()) == 1;
  if (!ok) ERR_clear_error();
  return ok;
}

const key* key_set::find(std::string_view kid) const {
  const auto it = std::find_if(keys.begin(), keys.end(), [&](const key& k) { return k.kid() == kid; });
  return it == keys.end() ? nullptr : &*it;
}

result<parsed_jwks> parse_jwks(std::string_view json_text) {
  const json doc = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (doc.is_discarded()) return unauthenticated("JWKS is not JSON");
  if (!doc.is_object()) return unauthenticated("JWKS is not a JSON object");
  const auto keys = doc.find("keys");
  if (keys == doc.end() || !keys->is_array()) return unauthenticated("JWKS has no keys array");
  parsed_jwks out;
  for (std::size_t i = 0; i < keys->size(); ++i) {
    auto k = key::from_jwk((*keys)[i]);
    if (k) {
      out.keys.keys.push_back(std::move(k).value());
      continue;
    }
    ++out.skipped;
    out.notes.push_back("keys[" + std::to_string(i) + "]: " + k.err().message);
  }
  return out;
}

}  // namespace sandfort::auth::jwt
