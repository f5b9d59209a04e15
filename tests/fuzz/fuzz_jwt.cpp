// Attacker: anyone who can send sandfortd a bearer token (the OIDC access-token path: every API
// request with "Authorization: Bearer <JWT>"), and whoever controls or impersonates an
// issuer's JWKS endpoint (the key set is fetched over the network and parsed here).
//
// The first byte picks what the rest is:
//   0  a JWKS document (parse_jwks, then each key against a signature made of the input)
//   1  a compact token: peek_issuer, parse, verify against keys this process made
//   2  "header JSON \0 claims JSON", signed here with the Ed25519 key, so verify() gets past the
//      signature and the claim checks meet hostile claims (types, huge numbers, arrays)
//   3  the same, signed ES256 (the r||s conversion)

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sandfort/core/base64.hpp"

#include "sandfort/auth/jwt.hpp"
#include "support.hpp"

using namespace sandfort;
namespace jwt = sandfort::auth::jwt;
using nlohmann::json;

namespace {

constexpr const char* issuer = "https://idp.example.test";
const time_point now = time_point(std::chrono::seconds(1767225600));

std::string b64url(std::string_view in) { return base64url_encode(in); }

using pkey_ptr = std::shared_ptr<EVP_PKEY>;

std::string bn_param(EVP_PKEY* k, const char* name, int width) {
  BIGNUM* bn = nullptr;
  FUZZ_CHECK(EVP_PKEY_get_bn_param(k, name, &bn) == 1);
  std::string out(static_cast<std::size_t>(width > 0 ? width : BN_num_bytes(bn)), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size()));
  BN_free(bn);
  return out;
}

std::string sign(EVP_PKEY* k, bool digest, std::string_view input) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  FUZZ_CHECK(EVP_DigestSignInit(ctx.get(), nullptr, digest ? EVP_sha256() : nullptr, nullptr, k) == 1);
  std::size_t len = 0;
  auto in = reinterpret_cast<const unsigned char*>(input.data());
  FUZZ_CHECK(EVP_DigestSign(ctx.get(), nullptr, &len, in, input.size()) == 1);
  std::string sig(len, '\0');
  FUZZ_CHECK(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, in, input.size()) == 1);
  sig.resize(len);
  return sig;
}

// DER ECDSA-Sig-Value → the JWS 64-byte r||s.
std::string jws_ecdsa(const std::string& der) {
  auto p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* s = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  FUZZ_CHECK(s != nullptr);
  std::string out(64, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(s), reinterpret_cast<unsigned char*>(out.data()), 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(s), reinterpret_cast<unsigned char*>(out.data() + 32), 32);
  ECDSA_SIG_free(s);
  return out;
}

struct keys {
  pkey_ptr ed{EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"), EVP_PKEY_free};
  pkey_ptr ec{EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free};
  pkey_ptr rsa{EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", std::size_t{2048}), EVP_PKEY_free};
  std::vector<jwt::key> set;

  keys() {
    std::size_t len = 32;
    std::string raw(32, '\0');
    FUZZ_CHECK(EVP_PKEY_get_raw_public_key(ed.get(), reinterpret_cast<unsigned char*>(raw.data()), &len) == 1);
    json jwks = {{"keys",
                  {{{"kty", "OKP"}, {"crv", "Ed25519"}, {"kid", "ed"}, {"x", b64url(raw)}},
                   {{"kty", "EC"},
                    {"crv", "P-256"},
                    {"kid", "ec"},
                    {"x", b64url(bn_param(ec.get(), OSSL_PKEY_PARAM_EC_PUB_X, 32))},
                    {"y", b64url(bn_param(ec.get(), OSSL_PKEY_PARAM_EC_PUB_Y, 32))}},
                   {{"kty", "RSA"},
                    {"kid", "rsa"},
                    {"alg", "RS256"},
                    {"use", "sig"},
                    {"n", b64url(bn_param(rsa.get(), OSSL_PKEY_PARAM_RSA_N, 0))},
                    {"e", b64url(bn_param(rsa.get(), OSSL_PKEY_PARAM_RSA_E, 0))}}}}};
    auto parsed = jwt::parse_jwks(jwks.dump());
    FUZZ_CHECK(parsed.ok() && parsed->keys.keys.size() == 3 && parsed->skipped == 0);
    set = parsed->keys.keys;
  }
};

const keys& our_keys() {
  static const keys k;
  return k;
}

jwt::policy our_policy() {
  jwt::policy p;
  p.issuer = issuer;
  p.audiences = {"sandfortd"};
  p.algorithms = {jwt::algorithm::rs256, jwt::algorithm::es256, jwt::algorithm::eddsa};
  return p;
}

void check_token(std::string_view compact, bool signed_by_us) {
  auto p = our_policy();
  (void)jwt::peek_issuer(compact);
  auto t = jwt::parse(compact, p);
  if (!t) return;
  FUZZ_CHECK(compact.size() <= p.max_token_bytes);
  FUZZ_CHECK(!t->signature.empty());
  FUZZ_CHECK(compact.starts_with(t->signing_input));
  for (const auto& k : our_keys().set) {
    auto c = jwt::verify(*t, k, p, now);
    if (!c) continue;
    // Only our own signatures verify, and only with claims the policy accepts.
    FUZZ_CHECK(signed_by_us);
    FUZZ_CHECK(c->issuer == issuer);
    FUZZ_CHECK(!c->subject.empty());
    FUZZ_CHECK(c->expires_at + p.leeway > now);
    FUZZ_CHECK(k.fits(t->alg));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)our_keys();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto parsed = jwt::parse_jwks(input);
      if (!parsed) return 0;
      FUZZ_CHECK(parsed->notes.size() == parsed->skipped);
      for (const auto& k : parsed->keys.keys) {
        FUZZ_CHECK(!k.kid().empty());
        FUZZ_CHECK(parsed->keys.find(k.kid()) != nullptr);
        for (auto a : {jwt::algorithm::rs256, jwt::algorithm::es256, jwt::algorithm::eddsa})
          if (k.fits(a)) (void)k.verify_signature(a, "a.b", input.substr(0, 512));
      }
      return 0;
    }
    case 1:
      check_token(input, false);
      return 0;
    default: {
      auto [header, claims] = fuzz::split(input, std::string_view("\0", 1));
      std::string signing_input = b64url(header) + "." + b64url(claims);
      std::string sig = data[0] % 4 == 2 ? sign(our_keys().ed.get(), false, signing_input)
                                         : jws_ecdsa(sign(our_keys().ec.get(), true, signing_input));
      check_token(signing_input + "." + b64url(sig), true);
      return 0;
    }
  }
}
