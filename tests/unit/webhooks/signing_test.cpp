#include "sandfort/webhooks/signing.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace sandfort::webhooks;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("the signature is HMAC-SHA256 of \"<t>.<body>\" keyed by the secret's text, Stripe's way") {
  const std::string secret = "whsec_" + std::string(64, 'c');
  // Computed apart (Python's hmac) for a secret of 32 "ab" pairs.
  const std::string ab = [] {
    std::string s = "whsec_";
    for (int i = 0; i < 32; ++i) s += "ab";
    return s;
  }();
  CHECK(signature_header(ab, 1700000000, R"({"a":1})") ==
        "t=1700000000,v1=4b04ef65acbc4206285c1c32a0ecc6736f604a6d113dadee0537e39c2d2b1c41");
  // Anything signed changes it: the body, the time, the secret.
  CHECK(signature_header(ab, 1700000000, R"({"a":2})") != signature_header(ab, 1700000000, R"({"a":1})"));
  CHECK(signature_header(ab, 1700000001, R"({"a":1})") != signature_header(ab, 1700000000, R"({"a":1})"));
  CHECK(signature_header(secret, 1700000000, R"({"a":1})") != signature_header(ab, 1700000000, R"({"a":1})"));
}

TEST_CASE("a new secret is whsec_ and 32 random bytes in hex, never the same twice") {
  const auto a = new_secret();
  const auto b = new_secret();
  CHECK(looks_like_secret(a));
  CHECK(looks_like_secret(b));
  CHECK(a != b);
  CHECK(a.size() == 6 + 64);
  CHECK_FALSE(looks_like_secret("whsec_abc"));
  CHECK_FALSE(looks_like_secret("sfk_" + std::string(64, 'a')));
  CHECK_FALSE(looks_like_secret("whsec_" + std::string(64, 'G')));
}

TEST_CASE("the idempotency key is the organization and the chain's seq") {
  CHECK(event_id("org-1a2b", 42) == "org-1a2b:42");
}

TEST_CASE("retries back off exponentially up to the cap, with equal jitter in the upper half") {
  const retry_policy p{milliseconds(1000), milliseconds(60'000), seconds(86'400)};
  // jitter 0: the lower end of each delay's upper half; jitter → 1: the full delay.
  CHECK(retry_delay(p, 1, 0.0) == milliseconds(500));
  CHECK(retry_delay(p, 1, 1.0) == milliseconds(1000));
  CHECK(retry_delay(p, 2, 0.0) == milliseconds(1000));
  CHECK(retry_delay(p, 2, 1.0) == milliseconds(2000));
  CHECK(retry_delay(p, 3, 0.5) == milliseconds(3000));
  CHECK(retry_delay(p, 6, 1.0) == milliseconds(32'000));
  CHECK(retry_delay(p, 7, 1.0) == milliseconds(60'000));  // capped
  CHECK(retry_delay(p, 7, 0.0) == milliseconds(30'000));
  // However many attempts: no overflow, still the cap.
  CHECK(retry_delay(p, 1'000'000, 1.0) == milliseconds(60'000));
  // Out-of-range jitter is clamped.
  CHECK(retry_delay(p, 1, -3.0) == milliseconds(500));
  CHECK(retry_delay(p, 1, 7.0) == milliseconds(1000));
  // The default schedule: 30 s, 1 min, 2 min, … up to an hour.
  const retry_policy d;
  CHECK(retry_delay(d, 1, 1.0) == milliseconds(30'000));
  CHECK(retry_delay(d, 8, 1.0) == milliseconds(3'600'000));
}

TEST_CASE("no attempt is planned past max_age after the event, then the delivery has failed") {
  const retry_policy p{milliseconds(1000), milliseconds(60'000), seconds(100)};
  const std::int64_t event = 1'000'000;
  // Early on: now + delay.
  CHECK(next_attempt_ms(p, event, event + 10, 1, 1.0) == event + 10 + 1000);
  // A delay that would end after event + 100 s: none.
  CHECK(next_attempt_ms(p, event, event + 99'500, 1, 1.0) == std::nullopt);
  CHECK(next_attempt_ms(p, event, event + 99'000, 1, 1.0) == event + 100'000);
  // An event already older than max_age gets no retry at all.
  CHECK(next_attempt_ms(p, event, event + 200'000, 1, 0.0) == std::nullopt);
  // The whole schedule in a day at the defaults: about 30 attempts, each ≤ an hour apart.
  const retry_policy d;
  std::int64_t now = 0;
  int attempts = 1;
  while (auto next = next_attempt_ms(d, 0, now, attempts, 1.0)) {
    CHECK(*next - now <= 3'600'000);
    now = *next;
    ++attempts;
  }
  CHECK(attempts >= 24);
  CHECK(attempts <= 40);
  CHECK(now <= 86'400'000);
}
