#pragma once
// Verification of OIDC access tokens (JWS compact serialization, RFC 7515/7517/7519), in two steps
// so that nothing in an unverified token steers us: parse() reads only the header and refuses
// what we never honour (alg none or HMAC, jku/x5u/jwk/x5c/crit); the caller picks the key by kid
// from the issuer's own key set; verify() checks the signature, then the claims. No network here.

#include <chrono>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY, kept out of this header

namespace sandfort::auth::jwt {

enum class algorithm { rs256, es256, eddsa };
// "RS256", "ES256", "EdDSA" exactly; nullopt for anything else.
std::optional<algorithm> parse_algorithm(std::string_view name);
std::string_view to_string(algorithm a);

// What a JWK holds: kty RSA, kty EC with crv P-256, kty OKP with crv Ed25519.
enum class key_type { rsa, ec_p256, ed25519 };
std::string_view to_string(key_type t);

// One verification key of a JWKS. Immutable and cheap to copy: the OpenSSL key is shared.
class key {
 public:
  // From one JWK object; the error says why the key is unusable (for the log).
  static result<key> from_jwk(const nlohmann::json& jwk);

  const std::string& kid() const { return kid_; }
  key_type type() const { return type_; }
  // The JWK's own "alg" member, when it has one.
  std::optional<algorithm> alg() const { return alg_; }
  // Whether kty/crv are the ones alg needs.
  bool fits(algorithm a) const;
  // The bare JWS signature check (ES256 in its 64-byte r||s form). Prefer jwt::verify, which
  // also checks the key against the token and the claims.
  bool verify_signature(algorithm a, std::string_view signing_input, std::string_view signature) const;

 private:
  key(std::string kid, key_type type, std::optional<algorithm> alg, std::shared_ptr<evp_pkey_st> pkey);

  std::string kid_;
  key_type type_;
  std::optional<algorithm> alg_;
  std::shared_ptr<evp_pkey_st> pkey_;
};

struct key_set {
  std::vector<key> keys;
  // The first key with that kid; nullptr when absent.
  const key* find(std::string_view kid) const;
};

struct parsed_jwks {
  key_set keys;
  std::size_t skipped = 0;
  // One line per skipped key ("keys[2]: RSA key under 2048 bits"), for the server log.
  std::vector<std::string> notes;
};
// Parses a JWKS document ({"keys":[...]}). Keys not for signatures (use other than "sig", key_ops
// without "verify"), of unsupported kty/crv/alg, without kid, malformed, or RSA under 2048 bits are
// skipped; a document that is not a JSON object with a "keys" array is an error.
result<parsed_jwks> parse_jwks(std::string_view json_text);

struct policy {
  std::string issuer;                  // `iss` must equal it exactly
  std::vector<std::string> audiences;  // `aud` (string or array) must contain one of them
  std::vector<algorithm> algorithms;   // allowed algs; none and HS* can never be among them
  std::chrono::seconds leeway{60};     // for exp, nbf, iat
  std::size_t max_token_bytes = 8192;
};

// A token whose header passed step 1. Nothing in it is verified yet.
struct token {
  algorithm alg;
  std::string kid;            // empty when the header has none
  std::string signing_input;  // "header.payload" as received
  std::string signature;      // decoded bytes
  std::string payload_json;   // decoded, not parsed
};
// Step 1, before any key is looked up: size cap, three strict base64url parts, header a JSON
// object, alg a string allowed by the policy, kid a string when present, and none of the headers
// crit, jku, x5u, jwk, x5c, and a non-empty signature.
result<token> parse(std::string_view compact, const policy& p);

// The `iss` of an unverified token, to choose whose policy and key set judge it; nullopt when the
// token is not three base64url parts with a JSON object payload holding a string iss. Trust
// nothing else from it. Tokens over 64 KiB are refused unread; the caller caps smaller first.
std::optional<std::string> peek_issuer(std::string_view compact);

struct claims {
  std::string issuer;
  std::string subject;
  time_point expires_at;
  nlohmann::json all;  // the whole payload
};
// Step 2: the key must fit the token (kty/crv for alg, its own alg if any, its kid if the token
// names one), the signature must verify, then the claims: iss exact, aud contains ours, exp
// required, now < exp + leeway, nbf and iat (if present) <= now + leeway, sub a non-empty string.
result<claims> verify(const token& t, const key& k, const policy& p, time_point now);

}  // namespace sandfort::auth::jwt
