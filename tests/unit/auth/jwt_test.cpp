#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <utility>

#include "jwt_support.hpp"
#include "sandfort/auth/jwt.hpp"

using namespace sandfort;
namespace jwt = sandfort::auth::jwt;
using nlohmann::json;
using namespace sandfort::testing::jwt_support;

namespace {


constexpr const char* issuer = "https://idp.example.test";
constexpr const char* audience = "sandfortd";
constexpr long long now_s = 1767225600;  // 2026-01-01T00:00:00Z
const time_point now = time_point(std::chrono::seconds(now_s));

std::string compact(const json& header, const json& payload, const signer& sign) {
  return compact_raw(header.dump(), payload.dump(), sign);
}

json header(const char* alg, const char* kid) { return {{"alg", alg}, {"kid", kid}, {"typ", "JWT"}}; }

json good_claims() {
  return {{"iss", issuer},       {"aud", audience},      {"sub", "user-123"},
          {"iat", now_s - 10},   {"nbf", now_s - 10},    {"exp", now_s + 300},
          {"groups", {"sandfort-admins"}}};
}
json claims_with(const char* name, json value) {
  json c = good_claims();
  c[name] = std::move(value);
  return c;
}
json claims_without(const char* name) {
  json c = good_claims();
  c.erase(name);
  return c;
}

struct test_keys {
  pkey_ptr rsa = rsa_key(2048);
  pkey_ptr rsa_small = rsa_key(1024);
  pkey_ptr ec = ec_key();
  pkey_ptr ed = ed_key();
  pkey_ptr attacker_rsa = rsa_key(2048);
  pkey_ptr attacker_ec = ec_key();

  json jwks() const {
    json rs256_only = rsa_jwk(rsa, "rsa-rs256");
    rs256_only["alg"] = "RS256";
    json enc = rsa_jwk(rsa, "rsa-enc");
    enc["use"] = "enc";
    return {{"keys",
             {rsa_jwk(rsa, "rsa-1"), rs256_only, ec_jwk(ec, "ec-1"), ed_jwk(ed, "ed-1"),
              rsa_jwk(rsa_small, "rsa-small"), enc}}};
  }
};

const test_keys& keys() {
  static const test_keys k;
  return k;
}

const jwt::key_set& issuer_keys() {
  static const jwt::key_set set = [] {
    auto parsed = jwt::parse_jwks(keys().jwks().dump());
    REQUIRE(parsed);
    return parsed->keys;
  }();
  return set;
}

jwt::policy default_policy() {
  jwt::policy p;
  p.issuer = issuer;
  p.audiences = {"other-service", audience};
  p.algorithms = {jwt::algorithm::rs256, jwt::algorithm::es256, jwt::algorithm::eddsa};
  return p;
}

std::string valid_rs256(const json& claims = good_claims()) {
  return compact(header("RS256", "rsa-1"), claims, rs256_with(keys().rsa));
}
std::string valid_es256(const json& claims = good_claims()) {
  return compact(header("ES256", "ec-1"), claims, es256_with(keys().ec));
}
std::string valid_eddsa(const json& claims = good_claims()) {
  return compact(header("EdDSA", "ed-1"), claims, eddsa_with(keys().ed));
}

// What sandfortd does with a token: parse, look the kid up in the issuer's key set, verify.
result<jwt::claims> check(std::string_view token, const jwt::policy& p = default_policy()) {
  auto t = jwt::parse(token, p);
  if (!t) return std::move(t).err();
  const jwt::key* k = issuer_keys().find(t->kid);
  if (!k) return make_error(errc::unauthenticated, "kid not in the issuer's key set");
  return jwt::verify(*t, *k, p, now);
}

// The reason a token is refused ("accepted" when it is not). Reasons never quote the token, and
// no failure leaves OpenSSL's error queue behind.
std::string refusal(std::string_view token, const jwt::policy& p = default_policy()) {
  auto r = check(token, p);
  CHECK(ERR_peek_error() == 0);
  if (r) return "accepted";
  CHECK(r.err().code == errc::unauthenticated);
  std::size_t start = 0;
  while (start <= token.size()) {
    const std::size_t dot = std::min(token.find('.', start), token.size());
    const std::string_view part = token.substr(start, dot - start);
    if (part.size() >= 8) CHECK(r.err().message.find(part) == std::string::npos);
    start = dot + 1;
  }
  return r.err().message;
}

std::string part(const std::string& token, int index) {
  std::size_t start = 0;
  for (int i = 0; i < index; ++i) start = token.find('.', start) + 1;
  return token.substr(start, token.find('.', start) - start);
}

std::string with_signature(const std::string& token, const std::string& raw_signature) {
  return token.substr(0, token.rfind('.') + 1) + b64url(raw_signature);
}

std::string decoded_signature(const std::string& token) {
  auto t = jwt::parse(token, default_policy());
  REQUIRE(t);
  return t->signature;
}

}  // namespace

TEST_CASE("parse_algorithm knows RS256, ES256 and EdDSA by their exact names") {
  CHECK(jwt::parse_algorithm("RS256") == jwt::algorithm::rs256);
  CHECK(jwt::parse_algorithm("ES256") == jwt::algorithm::es256);
  CHECK(jwt::parse_algorithm("EdDSA") == jwt::algorithm::eddsa);
  for (const char* other : {"rs256", "EDDSA", "none", "HS256", "RS512", "PS256", "ES256K", ""})
    CHECK_FALSE(jwt::parse_algorithm(other));
  for (auto a : {jwt::algorithm::rs256, jwt::algorithm::es256, jwt::algorithm::eddsa})
    CHECK(jwt::parse_algorithm(jwt::to_string(a)) == a);
}

TEST_CASE("valid RS256, ES256 and EdDSA tokens verify and give their claims") {
  for (const auto& token : {valid_rs256(), valid_es256(), valid_eddsa()}) {
    auto c = check(token);
    REQUIRE(c);
    CHECK(c->issuer == issuer);
    CHECK(c->subject == "user-123");
    CHECK(c->expires_at == now + std::chrono::seconds(300));
    CHECK(c->all.at("groups") == json({"sandfort-admins"}));
    CHECK(c->all.at("aud") == audience);
  }
  auto t = jwt::parse(valid_es256(), default_policy());
  REQUIRE(t);
  CHECK(t->alg == jwt::algorithm::es256);
  CHECK(t->kid == "ec-1");
  CHECK(t->signature.size() == 64);
}

TEST_CASE("claims in their other valid forms are accepted") {
  CHECK(refusal(valid_rs256(claims_with("aud", {"first", audience, "last"}))) == "accepted");
  CHECK(refusal(valid_rs256(claims_with("exp", static_cast<double>(now_s) + 300.5))) == "accepted");
  CHECK(refusal(valid_rs256(claims_without("nbf"))) == "accepted");
  CHECK(refusal(valid_rs256(claims_without("iat"))) == "accepted");
  auto fractional = check(valid_rs256(claims_with("exp", static_cast<double>(now_s) + 300.5)));
  REQUIRE(fractional);
  CHECK(fractional->expires_at == now + std::chrono::milliseconds(300500));

  // Without a kid the caller chooses the key; the key's kid then does not matter.
  const std::string no_kid = compact({{"alg", "RS256"}}, good_claims(), rs256_with(keys().rsa));
  auto t = jwt::parse(no_kid, default_policy());
  REQUIRE(t);
  CHECK(t->kid.empty());
  CHECK(jwt::verify(*t, *issuer_keys().find("rsa-1"), default_policy(), now));
}

TEST_CASE("exp, nbf and iat allow exactly the policy's leeway") {
  const auto p = default_policy();  // 60 s
  CHECK(refusal(valid_es256(claims_with("exp", now_s - 59))) == "accepted");
  CHECK(refusal(valid_es256(claims_with("exp", now_s - 60))) == "token expired");
  CHECK(refusal(valid_es256(claims_with("nbf", now_s + 60))) == "accepted");
  CHECK(refusal(valid_es256(claims_with("nbf", now_s + 61))) == "token not valid yet (nbf in the future)");
  CHECK(refusal(valid_es256(claims_with("iat", now_s + 60))) == "accepted");
  CHECK(refusal(valid_es256(claims_with("iat", now_s + 61))) == "iat is in the future");
  auto strict = p;
  strict.leeway = std::chrono::seconds(0);
  CHECK(refusal(valid_es256(claims_with("exp", now_s + 1)), strict) == "accepted");
  CHECK(refusal(valid_es256(claims_with("exp", now_s)), strict) == "token expired");
  CHECK(refusal(valid_es256(claims_with("nbf", now_s + 1)), strict) == "token not valid yet (nbf in the future)");
}

TEST_CASE("a forged or malformed token is refused with a specific reason") {
  const auto& k = keys();
  const std::string rs = valid_rs256();
  const std::string es = valid_es256();
  const std::string ed = valid_eddsa();
  const std::string rs_sig = decoded_signature(rs);
  const json attacker_jwk = ec_jwk(k.attacker_ec, "attacker");
  auto sign_none = [](std::string_view) { return std::string(); };
  auto with_header = [&](json extra) {
    json h = header("RS256", "rsa-1");
    h.update(extra);
    return compact(h, good_claims(), rs256_with(k.rsa));
  };
  std::string non_canonical = rs;  // the same signature bytes, written with non-zero leftover bits
  non_canonical.back() = non_canonical.back() == 'A' ? 'B' : static_cast<char>(non_canonical.back() + 1);

  const std::vector<std::pair<std::string, std::string>> corpus = {
      // alg
      {compact(header("none", "rsa-1"), good_claims(), sign_none), "alg none is not allowed"},
      {compact(header("None", "rsa-1"), good_claims(), sign_none), "alg none is not allowed"},
      {compact(header("NONE", "rsa-1"), good_claims(), sign_none), "alg none is not allowed"},
      {compact(header("none", "rsa-1"), good_claims(), rs256_with(k.rsa)), "alg none is not allowed"},
      {compact(header("HS256", "rsa-1"), good_claims(), hs256_with(public_pem(k.rsa))),
       "HMAC algs (HS*) are not allowed"},
      {compact(header("HS256", "rsa-1"), good_claims(), hs256_with(rsa_jwk(k.rsa, "rsa-1").dump())),
       "HMAC algs (HS*) are not allowed"},
      {compact(header("hs512", "rsa-1"), good_claims(), hs256_with("secret")), "HMAC algs (HS*) are not allowed"},
      {compact(header("RS512", "rsa-1"), good_claims(), rs256_with(k.rsa)), "alg is not RS256, ES256 or EdDSA"},
      {compact({{"kid", "rsa-1"}}, good_claims(), rs256_with(k.rsa)), "header has no alg"},
      {compact({{"alg", 256}, {"kid", "rsa-1"}}, good_claims(), rs256_with(k.rsa)), "alg is not a string"},
      {compact({{"alg", "RS256"}, {"kid", 7}}, good_claims(), rs256_with(k.rsa)), "kid is not a string"},
      // headers never followed
      {with_header({{"jku", "https://attacker.example/jwks.json"}}), "header jku is refused"},
      {with_header({{"x5u", "https://attacker.example/cert.pem"}}), "header x5u is refused"},
      {with_header({{"x5c", {"MIIB"}}}), "header x5c is refused"},
      {with_header({{"crit", {"exp"}}, {"exp", now_s + 300}}), "header crit is refused"},
      {compact({{"alg", "ES256"}, {"jwk", attacker_jwk}}, good_claims(), es256_with(k.attacker_ec)),
       "header jwk is refused"},
      // keys
      {compact(header("RS256", "unknown-kid"), good_claims(), rs256_with(k.rsa)), "kid not in the issuer's key set"},
      {compact(header("RS256", "rsa-small"), good_claims(), rs256_with(k.rsa_small)),
       "kid not in the issuer's key set"},
      {compact(header("RS256", "rsa-enc"), good_claims(), rs256_with(k.rsa)), "kid not in the issuer's key set"},
      {compact(header("ES256", "rsa-1"), good_claims(), es256_with(k.ec)), "key type RSA does not fit alg ES256"},
      {compact(header("EdDSA", "ec-1"), good_claims(), eddsa_with(k.ed)), "key type EC P-256 does not fit alg EdDSA"},
      {compact(header("RS256", "ed-1"), good_claims(), rs256_with(k.rsa)),
       "key type OKP Ed25519 does not fit alg RS256"},
      {compact(header("ES256", "rsa-rs256"), good_claims(), es256_with(k.ec)), "key is for alg RS256, token says ES256"},
      {compact(header("RS256", "rsa-1"), good_claims(), rs256_with(k.attacker_rsa)), "signature does not verify"},
      {compact(header("ES256", "ec-1"), good_claims(), es256_with(k.attacker_ec)), "signature does not verify"},
      // signatures
      {part(rs, 0) + "." + part(valid_rs256(claims_with("sub", "admin")), 1) + "." + part(rs, 2),
       "signature does not verify"},
      {part(es, 0) + "." + part(valid_es256(claims_with("sub", "admin")), 1) + "." + part(es, 2),
       "signature does not verify"},
      {part(ed, 0) + "." + part(valid_eddsa(claims_with("sub", "admin")), 1) + "." + part(ed, 2),
       "signature does not verify"},
      {with_signature(rs, rs_sig.substr(0, rs_sig.size() - 1)), "signature does not verify"},
      {with_signature(rs, rs_sig.substr(0, 128)), "signature does not verify"},
      {with_signature(es, decoded_signature(es).substr(0, 63)), "ES256 signature is not 64 bytes (r||s)"},
      {with_signature(ed, decoded_signature(ed).substr(0, 63)), "signature does not verify"},
      {with_signature(rs, std::string(256, '\0')), "signature does not verify"},
      {with_signature(es, std::string(64, '\0')), "signature does not verify"},
      {rs.substr(0, rs.rfind('.') + 1), "signature is empty"},
      {compact(header("ES256", "ec-1"), good_claims(), es256_der_with(k.ec)), "ES256 signature is not 64 bytes (r||s)"},
      // structure and encoding
      {valid_rs256(claims_with("padding", std::string(100 * 1024, 'x'))), "token is larger than 8192 bytes"},
      {compact_raw("{\"alg\":\"RS256\"", good_claims().dump(), rs256_with(k.rsa)), "header is not JSON"},
      {compact_raw("not json at all", good_claims().dump(), rs256_with(k.rsa)), "header is not JSON"},
      {compact_raw("[\"RS256\",\"rsa-1\"]", good_claims().dump(), rs256_with(k.rsa)), "header is not a JSON object"},
      {part(rs, 0) + "." + part(rs, 1), "token is not three dot-separated parts"},
      {rs + "." + part(rs, 2), "token is not three dot-separated parts"},
      {"", "token is not three dot-separated parts"},
      {part(rs, 0) + "=." + part(rs, 1) + "." + part(rs, 2), "header is not base64url"},
      {rs + "==", "signature is not base64url"},
      {part(rs, 0) + ".+" + part(rs, 1).substr(1) + "." + part(rs, 2), "payload is not base64url"},
      {part(rs, 0) + "." + part(rs, 1) + "/." + part(rs, 2), "payload is not base64url"},
      {part(rs, 0) + " ." + part(rs, 1) + "." + part(rs, 2), "header is not base64url"},
      {non_canonical, "signature is not base64url"},
      {compact_raw(header("RS256", "rsa-1").dump(), "[1,2,3]", rs256_with(k.rsa)), "payload is not a JSON object"},
      {compact_raw(header("RS256", "rsa-1").dump(), "sub=admin", rs256_with(k.rsa)), "payload is not a JSON object"},
      // claims
      {valid_rs256(claims_with("iss", "https://attacker.example.test")), "iss does not match the issuer"},
      {valid_rs256(claims_with("iss", std::string(issuer) + "/")), "iss does not match the issuer"},
      {valid_rs256(claims_without("iss")), "iss missing or not a string"},
      {valid_rs256(claims_with("aud", "other")), "aud does not name this service"},
      {valid_rs256(claims_with("aud", json::array({"a", "b"}))), "aud does not name this service"},
      {valid_rs256(claims_with("aud", json::array())), "aud does not name this service"},
      {valid_rs256(claims_with("aud", {audience, 1})), "aud is not a string or an array of strings"},
      {valid_rs256(claims_without("aud")), "aud missing"},
      {valid_es256(claims_with("exp", now_s - 3600)), "token expired"},
      {valid_es256(claims_without("exp")), "exp missing"},
      {valid_es256(claims_with("exp", std::to_string(now_s + 300))), "exp is not a NumericDate"},
      {valid_es256(claims_with("exp", 1e300)), "exp is not a NumericDate"},
      {valid_es256(claims_with("exp", 18446744073709551615ULL)), "exp is not a NumericDate"},
      {valid_es256(claims_with("exp", -1)), "exp is not a NumericDate"},
      {valid_es256(claims_with("exp", true)), "exp is not a NumericDate"},
      {valid_es256(claims_with("nbf", now_s + 3600)), "token not valid yet (nbf in the future)"},
      {valid_es256(claims_with("nbf", "yesterday")), "nbf is not a NumericDate"},
      {valid_eddsa(claims_with("iat", now_s + 3600)), "iat is in the future"},
      {valid_eddsa(claims_with("iat", nullptr)), "iat is not a NumericDate"},
      {valid_eddsa(claims_without("sub")), "sub missing or empty"},
      {valid_eddsa(claims_with("sub", "")), "sub missing or empty"},
      {valid_eddsa(claims_with("sub", 42)), "sub missing or empty"},
  };
  CHECK(corpus.size() >= 20);
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    INFO("corpus entry " << i << ", expecting: " << corpus[i].second);
    CHECK(refusal(corpus[i].first) == corpus[i].second);
  }
}

TEST_CASE("the policy's algorithms and numbers decide") {
  auto rs256_only = default_policy();
  rs256_only.algorithms = {jwt::algorithm::rs256};
  CHECK(refusal(valid_es256(), rs256_only) == "alg ES256 is not allowed for this issuer");
  CHECK(refusal(valid_eddsa(), rs256_only) == "alg EdDSA is not allowed for this issuer");
  CHECK(refusal(valid_rs256(), rs256_only) == "accepted");

  // verify() checks the policy again, for a token parsed under another one.
  auto t = jwt::parse(valid_es256(), default_policy());
  REQUIRE(t);
  auto v = jwt::verify(*t, *issuer_keys().find("ec-1"), rs256_only, now);
  REQUIRE_FALSE(v);
  CHECK(v.err().message == "alg ES256 is not allowed for this issuer");

  auto small = default_policy();
  small.max_token_bytes = 64;
  CHECK(refusal(valid_rs256(), small) == "token is larger than 64 bytes");

  auto no_audience = default_policy();
  no_audience.audiences.clear();
  CHECK(refusal(valid_rs256(), no_audience) == "policy names no audience");
  auto no_issuer = default_policy();
  no_issuer.issuer.clear();
  CHECK(refusal(valid_rs256(claims_with("iss", ""))) == "iss does not match the issuer");
  CHECK(refusal(valid_rs256(claims_with("iss", "")), no_issuer) == "policy names no issuer");
}

TEST_CASE("verify refuses a key other than the one the token names") {
  auto t = jwt::parse(valid_rs256(), default_policy());
  REQUIRE(t);
  auto v = jwt::verify(*t, *issuer_keys().find("rsa-rs256"), default_policy(), now);
  REQUIRE_FALSE(v);
  CHECK(v.err().code == errc::unauthenticated);
  CHECK(v.err().message == "token kid does not name this key");
}

TEST_CASE("a kid of another issuer's key set is not found in ours") {
  const pkey_ptr other = ec_key();
  auto theirs = jwt::parse_jwks(json{{"keys", {ec_jwk(other, "other-issuer-1")}}}.dump());
  REQUIRE(theirs);
  const std::string token = compact(header("ES256", "other-issuer-1"), good_claims(), es256_with(other));
  auto t = jwt::parse(token, default_policy());
  REQUIRE(t);  // step 1 passes: the header is fine
  CHECK(issuer_keys().find(t->kid) == nullptr);
  CHECK(theirs->keys.find(t->kid) != nullptr);
  CHECK(refusal(token) == "kid not in the issuer's key set");
}

TEST_CASE("peek_issuer reads iss without trusting the token") {
  CHECK(jwt::peek_issuer(valid_rs256()) == std::optional<std::string>(issuer));
  CHECK(jwt::peek_issuer(compact(header("none", "x"), claims_with("iss", "https://a.test"), [](std::string_view) {
          return std::string("x");
        })) == std::optional<std::string>("https://a.test"));
  CHECK_FALSE(jwt::peek_issuer(valid_rs256(claims_without("iss"))));
  CHECK_FALSE(jwt::peek_issuer(valid_rs256(claims_with("iss", 5))));
  CHECK_FALSE(jwt::peek_issuer("a.b"));
  CHECK_FALSE(jwt::peek_issuer("a.b.c.d"));
  CHECK_FALSE(jwt::peek_issuer("e30.!!.sig"));
  CHECK_FALSE(jwt::peek_issuer("e30." + b64url("[]") + ".sig"));
  CHECK_FALSE(jwt::peek_issuer(valid_rs256(claims_with("padding", std::string(70 * 1024, 'x')))));
}

TEST_CASE("parse_jwks keeps the signature keys and skips the rest with a note") {
  auto parsed = jwt::parse_jwks(keys().jwks().dump());
  REQUIRE(parsed);
  CHECK(parsed->keys.keys.size() == 4);
  CHECK(parsed->skipped == 2);
  CHECK(parsed->notes == std::vector<std::string>{"keys[4]: RSA key under 2048 bits",
                                                   "keys[5]: key is not for signatures (use)"});
  const auto& set = parsed->keys;
  REQUIRE(set.find("rsa-1") != nullptr);
  CHECK(set.find("rsa-1")->type() == jwt::key_type::rsa);
  CHECK_FALSE(set.find("rsa-1")->alg());
  CHECK(set.find("rsa-rs256")->alg() == jwt::algorithm::rs256);
  CHECK(set.find("ec-1")->type() == jwt::key_type::ec_p256);
  CHECK(set.find("ed-1")->type() == jwt::key_type::ed25519);
  CHECK(set.find("rsa-small") == nullptr);
  CHECK(set.find("rsa-enc") == nullptr);
  CHECK(set.find("") == nullptr);

  // Keys are cheap copies sharing one OpenSSL key; a copy verifies as the original.
  const jwt::key copy = *set.find("ed-1");
  auto t = jwt::parse(valid_eddsa(), default_policy());
  REQUIRE(t);
  CHECK(jwt::verify(*t, copy, default_policy(), now));
}

TEST_CASE("parse_jwks skips keys that are unusable, unsupported or malformed") {
  const auto& k = keys();
  json ec_off_curve = ec_jwk(k.ec, "ec-off-curve");
  std::string y = bn_param(k.ec, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
  y[31] = static_cast<char>(y[31] ^ 1);
  ec_off_curve["y"] = b64url(y);
  json ec_short = ec_jwk(k.ec, "ec-short");
  ec_short["x"] = b64url(bn_param(k.ec, OSSL_PKEY_PARAM_EC_PUB_X, 32).substr(1));
  json ec_labelled_rs256 = ec_jwk(k.ec, "ec-rs256");
  ec_labelled_rs256["alg"] = "RS256";
  json rsa_rs512 = rsa_jwk(k.rsa, "rsa-rs512");
  rsa_rs512["alg"] = "RS512";
  json rsa_encrypt_ops = rsa_jwk(k.rsa, "rsa-ops");
  rsa_encrypt_ops["key_ops"] = json::array({"encrypt", "wrapKey"});
  json rsa_verify_ops = rsa_jwk(k.rsa, "rsa-verify-ops");
  rsa_verify_ops["key_ops"] = {"verify"};
  json rsa_no_kid = rsa_jwk(k.rsa, "x");
  rsa_no_kid.erase("kid");
  json rsa_padded_n = rsa_jwk(k.rsa, "rsa-bad-n");
  rsa_padded_n["n"] = rsa_padded_n["n"].get<std::string>() + "=";
  json rsa_even_e = rsa_jwk(k.rsa, "rsa-even-e");
  rsa_even_e["e"] = b64url(std::string("\x01\x00\x00", 3));
  json ed448 = ed_jwk(k.ed, "ed448");
  ed448["crv"] = "Ed448";

  const json doc = {{"keys",
                     {ec_off_curve,
                      ec_short,
                      ec_labelled_rs256,
                      rsa_rs512,
                      rsa_encrypt_ops,
                      rsa_no_kid,
                      {{"kty", "oct"}, {"kid", "hmac-1"}, {"k", b64url("secret")}},
                      {{"kty", "RSA"}, {"kid", "rsa-empty"}},
                      rsa_padded_n,
                      rsa_even_e,
                      ed448,
                      {{"kid", "no-kty"}},
                      "not an object",
                      rsa_verify_ops}}};
  auto parsed = jwt::parse_jwks(doc.dump());
  REQUIRE(parsed);
  CHECK(ERR_peek_error() == 0);
  CHECK(parsed->notes == std::vector<std::string>{
                             "keys[0]: EC key is not a point on P-256",
                             "keys[1]: EC key without 32-byte x and y",
                             "keys[2]: key alg does not fit its kty",
                             "keys[3]: key alg is not RS256, ES256 or EdDSA",
                             "keys[4]: key is not for verification (key_ops)",
                             "keys[5]: key without kid",
                             "keys[6]: unsupported kty",
                             "keys[7]: RSA key without valid n and e",
                             "keys[8]: RSA key without valid n and e",
                             "keys[9]: RSA exponent is not acceptable",
                             "keys[10]: OKP key on a curve other than Ed25519",
                             "keys[11]: key without kty",
                             "keys[12]: key is not a JSON object",
                         });
  CHECK(parsed->skipped == 13);
  REQUIRE(parsed->keys.keys.size() == 1);
  CHECK(parsed->keys.keys[0].kid() == "rsa-verify-ops");
}

TEST_CASE("parse_jwks refuses a document that is not a key set") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "JWKS is not JSON"},
      {"{\"keys\":[", "JWKS is not JSON"},
      {"<html>", "JWKS is not JSON"},
      {"[]", "JWKS is not a JSON object"},
      {"\"keys\"", "JWKS is not a JSON object"},
      {"null", "JWKS is not a JSON object"},
      {"{}", "JWKS has no keys array"},
      {"{\"keys\":{}}", "JWKS has no keys array"},
      {"{\"keys\":\"[]\"}", "JWKS has no keys array"},
  };
  for (const auto& [text, reason] : cases) {
    INFO(text);
    auto parsed = jwt::parse_jwks(text);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.err().code == errc::unauthenticated);
    CHECK(parsed.err().message == reason);
  }
  auto empty = jwt::parse_jwks("{\"keys\":[]}");
  REQUIRE(empty);
  CHECK(empty->keys.keys.empty());
  CHECK(empty->skipped == 0);
}
