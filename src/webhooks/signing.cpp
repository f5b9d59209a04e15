#include "sandfort/webhooks/signing.hpp"

#include <algorithm>

#include "sandfort/core/ids.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::webhooks {

namespace {
constexpr std::string_view secret_prefix = "whsec_";
}

std::string new_secret() { return std::string(secret_prefix) + random_hex(32); }

bool looks_like_secret(std::string_view s) {
  if (!s.starts_with(secret_prefix) || s.size() != secret_prefix.size() + 64) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(secret_prefix.size()), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string signature_v1(std::string_view secret, std::int64_t unix_s, std::string_view body) {
  const std::string t = std::to_string(unix_s);
  std::string signed_text;
  signed_text.reserve(t.size() + 1 + body.size());
  signed_text.append(t).append(".").append(body);
  return hmac_sha256_hex(secret, signed_text);
}

std::string signature_header(std::string_view secret, std::int64_t unix_s, std::string_view body) {
  return "t=" + std::to_string(unix_s) + ",v1=" + signature_v1(secret, unix_s, body);
}

std::string event_id(std::string_view org_id, std::int64_t seq) {
  return std::string(org_id) + ":" + std::to_string(seq);
}

std::chrono::milliseconds retry_delay(const retry_policy& p, std::int64_t attempts, double jitter) {
  const std::int64_t base = std::max<std::int64_t>(1, p.base.count());
  const std::int64_t cap = std::max(base, static_cast<std::int64_t>(p.max.count()));
  std::int64_t full = base;
  // Doubling stops at the cap: no overflow whatever the count of attempts.
  for (std::int64_t i = 1; i < attempts && full < cap; ++i) full = std::min(cap, full * 2);
  full = std::min(full, cap);
  jitter = std::clamp(jitter, 0.0, 1.0);
  const auto half = full / 2;
  return std::chrono::milliseconds(full - half + static_cast<std::int64_t>(static_cast<double>(half) * jitter));
}

std::optional<std::int64_t> next_attempt_ms(const retry_policy& p, std::int64_t event_ms, std::int64_t now_ms,
                                            std::int64_t attempts, double jitter) {
  const std::int64_t at = now_ms + retry_delay(p, attempts, jitter).count();
  const std::int64_t last = event_ms + std::chrono::duration_cast<std::chrono::milliseconds>(p.max_age).count();
  if (at > last) return std::nullopt;
  return at;
}

}  // namespace sandfort::webhooks
