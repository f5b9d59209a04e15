#pragma once
// What a webhook delivery carries that a receiver checks (docs/events.md, "Webhooks"), and when
// a failed one is tried again. Pure: no clock, no randomness of its own, no I/O.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandfort::webhooks {

// "whsec_" and 32 random bytes in lowercase hex: shown once when made (create, rotate-secret).
std::string new_secret();
bool looks_like_secret(std::string_view s);

// `Sandfort-Signature`: "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>", the key
// being the secret's text as shown (whsec_ included), as Stripe's scheme has it.
std::string signature_header(std::string_view secret, std::int64_t unix_s, std::string_view body);
// The v1 value alone: hex HMAC-SHA256(secret, "<t>.<body>").
std::string signature_v1(std::string_view secret, std::int64_t unix_s, std::string_view body);

// `Sandfort-Event-Id`: the idempotency key, "<org id>:<seq>", the same on every attempt.
std::string event_id(std::string_view org_id, std::int64_t seq);

struct retry_policy {
  std::chrono::milliseconds base{30'000};      // the first retry's delay
  std::chrono::milliseconds max{3'600'000};    // the longest delay
  std::chrono::seconds max_age{86'400};        // after the event happened, no attempt starts
};

// The delay after the `attempts`-th failed attempt (1 for the first): base·2^(attempts−1), at most
// `max`, then "equal jitter": a uniform point of its upper half, `jitter` in [0, 1) choosing it,
// so that receivers coming back are not hit by every daemon's retries at once.
std::chrono::milliseconds retry_delay(const retry_policy& p, std::int64_t attempts, double jitter);

// When the next attempt is due (unix ms), or nullopt when the event is too old for one: it
// happened at `event_ms`, the last attempt failed at `now_ms` and was the `attempts`-th.
std::optional<std::int64_t> next_attempt_ms(const retry_policy& p, std::int64_t event_ms, std::int64_t now_ms,
                                            std::int64_t attempts, double jitter);

}  // namespace sandfort::webhooks
