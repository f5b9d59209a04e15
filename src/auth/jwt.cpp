#include "sandfort/auth/jwt.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>

#include "sandfort/core/base64.hpp"

namespace sandfort::auth::jwt {

namespace {

using json = nlohmann::json;

// Headers that would make us fetch or trust a key the token itself points to, or that demand
// extensions we do not implement (crit). Refused outright rather than ignored.
constexpr std::array<const char*, 5> refused_headers = {"crit", "jku", "x5u", "jwk", "x5c"};
// NumericDates past 2200-01-01 are refused: time_point counts nanoseconds and ends in 2262.
constexpr double max_numeric_date = 7258118400.0;
constexpr std::size_t peek_max_bytes = 64 * 1024;


bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool allowed(const policy& p, algorithm a) {
  return std::find(p.algorithms.begin(), p.algorithms.end(), a) != p.algorithms.end();
}

// Only names we know go into a reason: the alg string is the sender's and could be anything.
result<algorithm> header_alg(const json& header, const policy& p) {
  const auto it = header.find("alg");
  if (it == header.end()) return unauthenticated("header has no alg");
  if (!it->is_string()) return unauthenticated("alg is not a string");
  const auto& name = it->get_ref<const std::string&>();
  if (iequals(name, "none")) return unauthenticated("alg none is not allowed");
  if (name.size() >= 2 && iequals(std::string_view(name).substr(0, 2), "HS"))
    return unauthenticated("HMAC algs (HS*) are not allowed");
  const auto a = parse_algorithm(name);
  if (!a) return unauthenticated("alg is not RS256, ES256 or EdDSA");
  if (!allowed(p, *a)) return unauthenticated("alg " + std::string(to_string(*a)) + " is not allowed for this issuer");
  return *a;
}

result<void> check_header(const json& header) {
  for (const char* name : refused_headers)
    if (header.contains(name)) return unauthenticated("header " + std::string(name) + " is refused");
  const auto kid = header.find("kid");
  if (kid != header.end() && !kid->is_string()) return unauthenticated("kid is not a string");
  return ok_t{};
}

// Seconds since the epoch from a NumericDate: integer or float, finite, 0 to year 2200.
std::optional<double> numeric_date(const json& v) {
  double s = 0;
  if (v.is_number_unsigned())
    s = static_cast<double>(std::min<std::uint64_t>(v.get<std::uint64_t>(), UINT64_C(1) << 53));
  else if (v.is_number_integer())
    s = static_cast<double>(std::clamp<std::int64_t>(v.get<std::int64_t>(), -1, INT64_C(1) << 53));
  else if (v.is_number_float())
    s = v.get<double>();
  else
    return std::nullopt;
  if (!std::isfinite(s) || s < 0 || s > max_numeric_date) return std::nullopt;
  return s;
}

// An optional NumericDate claim; nullopt in the result when absent.
result<std::optional<double>> time_claim(const json& payload, const char* name) {
  const auto it = payload.find(name);
  if (it == payload.end()) return std::optional<double>{};
  const auto s = numeric_date(*it);
  if (!s) return unauthenticated(std::string(name) + " is not a NumericDate");
  return s;
}

result<double> check_times(const json& payload, const policy& p, time_point now) {
  const double now_s = std::chrono::duration<double>(now.time_since_epoch()).count();
  const double leeway = static_cast<double>(std::max<std::chrono::seconds::rep>(p.leeway.count(), 0));
  auto exp = time_claim(payload, "exp");
  if (!exp) return std::move(exp).err();
  if (!*exp) return unauthenticated("exp missing");
  if (!(now_s < **exp + leeway)) return unauthenticated("token expired");
  auto nbf = time_claim(payload, "nbf");
  if (!nbf) return std::move(nbf).err();
  if (*nbf && **nbf > now_s + leeway) return unauthenticated("token not valid yet (nbf in the future)");
  auto iat = time_claim(payload, "iat");
  if (!iat) return std::move(iat).err();
  if (*iat && **iat > now_s + leeway) return unauthenticated("iat is in the future");
  return **exp;
}

result<std::string> check_issuer(const json& payload, const policy& p) {
  const auto it = payload.find("iss");
  if (it == payload.end() || !it->is_string()) return unauthenticated("iss missing or not a string");
  if (p.issuer.empty()) return unauthenticated("policy names no issuer");
  if (it->get_ref<const std::string&>() != p.issuer) return unauthenticated("iss does not match the issuer");
  return it->get<std::string>();
}

result<void> check_audience(const json& payload, const policy& p) {
  const auto it = payload.find("aud");
  if (it == payload.end()) return unauthenticated("aud missing");
  if (p.audiences.empty()) return unauthenticated("policy names no audience");
  const auto ours = [&](const json& v) {
    return std::find(p.audiences.begin(), p.audiences.end(), v.get_ref<const std::string&>()) != p.audiences.end();
  };
  if (it->is_string()) return ours(*it) ? result<void>(ok_t{}) : unauthenticated("aud does not name this service");
  if (!it->is_array() || !std::all_of(it->begin(), it->end(), [](const json& v) { return v.is_string(); }))
    return unauthenticated("aud is not a string or an array of strings");
  if (std::none_of(it->begin(), it->end(), ours)) return unauthenticated("aud does not name this service");
  return ok_t{};
}

result<claims> check_claims(const std::string& payload_json, const policy& p, time_point now) {
  json payload = json::parse(payload_json, nullptr, false);
  if (payload.is_discarded() || !payload.is_object()) return unauthenticated("payload is not a JSON object");
  auto issuer = check_issuer(payload, p);
  if (!issuer) return std::move(issuer).err();
  if (auto aud = check_audience(payload, p); !aud) return std::move(aud).err();
  auto exp = check_times(payload, p, now);
  if (!exp) return std::move(exp).err();
  const auto sub = payload.find("sub");
  if (sub == payload.end() || !sub->is_string() || sub->get_ref<const std::string&>().empty())
    return unauthenticated("sub missing or empty");
  const auto expires_at =
      time_point(std::chrono::duration_cast<time_point::duration>(std::chrono::duration<double>(*exp)));
  std::string subject = sub->get<std::string>();
  return claims{std::move(issuer).value(), std::move(subject), expires_at, std::move(payload)};
}

struct compact_parts {
  std::string_view header, payload, signature;
  std::string_view signing_input;  // header.payload
};

std::optional<compact_parts> split(std::string_view compact) {
  const auto first = compact.find('.');
  const auto second = first == std::string_view::npos ? first : compact.find('.', first + 1);
  if (second == std::string_view::npos || compact.find('.', second + 1) != std::string_view::npos)
    return std::nullopt;
  return compact_parts{compact.substr(0, first), compact.substr(first + 1, second - first - 1),
                       compact.substr(second + 1), compact.substr(0, second)};
}

}  // namespace

result<token> parse(std::string_view compact, const policy& p) {
  if (compact.size() > p.max_token_bytes)
    return unauthenticated("token is larger than " + std::to_string(p.max_token_bytes) + " bytes");
  const auto parts = split(compact);
  if (!parts) return unauthenticated("token is not three dot-separated parts");
  const auto header_text = base64url_decode(parts->header);
  if (!header_text) return unauthenticated("header is not base64url");
  const json header = json::parse(*header_text, nullptr, false);
  if (header.is_discarded()) return unauthenticated("header is not JSON");
  if (!header.is_object()) return unauthenticated("header is not a JSON object");
  auto alg = header_alg(header, p);
  if (!alg) return std::move(alg).err();
  if (auto checked = check_header(header); !checked) return std::move(checked).err();
  auto payload = base64url_decode(parts->payload);
  if (!payload) return unauthenticated("payload is not base64url");
  auto signature = base64url_decode(parts->signature);
  if (!signature) return unauthenticated("signature is not base64url");
  if (signature->empty()) return unauthenticated("signature is empty");
  const auto kid = header.find("kid");
  return token{*alg, kid == header.end() ? std::string() : kid->get<std::string>(),
               std::string(parts->signing_input), std::move(*signature), std::move(*payload)};
}

std::optional<std::string> peek_issuer(std::string_view compact) {
  if (compact.size() > peek_max_bytes) return std::nullopt;
  const auto parts = split(compact);
  if (!parts) return std::nullopt;
  const auto payload_text = base64url_decode(parts->payload);
  if (!payload_text) return std::nullopt;
  const json payload = json::parse(*payload_text, nullptr, false);
  if (!payload.is_object()) return std::nullopt;  // a discarded value is not an object either
  const auto iss = payload.find("iss");
  if (iss == payload.end() || !iss->is_string()) return std::nullopt;
  return iss->get<std::string>();
}

result<claims> verify(const token& t, const key& k, const policy& p, time_point now) {
  const std::string alg(to_string(t.alg));
  if (!allowed(p, t.alg)) return unauthenticated("alg " + alg + " is not allowed for this issuer");
  if (!t.kid.empty() && t.kid != k.kid()) return unauthenticated("token kid does not name this key");
  if (k.alg() && *k.alg() != t.alg)
    return unauthenticated("key is for alg " + std::string(to_string(*k.alg())) + ", token says " + alg);
  if (!k.fits(t.alg)) return unauthenticated("key type " + std::string(to_string(k.type())) + " does not fit alg " + alg);
  if (t.alg == algorithm::es256 && t.signature.size() != 64)
    return unauthenticated("ES256 signature is not 64 bytes (r||s)");
  if (!k.verify_signature(t.alg, t.signing_input, t.signature)) return unauthenticated("signature does not verify");
  return check_claims(t.payload_json, p, now);
}

}  // namespace sandfort::auth::jwt
