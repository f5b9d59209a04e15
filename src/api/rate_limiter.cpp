#include "sandfort/api/rate_limiter.hpp"

#include <algorithm>
#include <cmath>

namespace sandfort::api {

namespace {

double seconds_between(time_point from, time_point to) {
  return std::max(0.0, std::chrono::duration<double>(to - from).count());
}

time_point after(time_point t, double seconds) {
  return t + std::chrono::duration_cast<time_point::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

const rate_limit& rate_limiter::limit_for(const auth::principal& p) const {
  if (p.superadmin) return limits_.superadmin;
  switch (p.granted) {
    case auth::role::viewer: return limits_.viewer;
    case auth::role::member: return limits_.member;
    case auth::role::admin: return limits_.admin;
  }
  return limits_.viewer;
}

void rate_limiter::drop_refilled(time_point now) {
  // Least recently used last: a bucket behind one that is not full yet may stay a little
  // longer, which costs memory within the cap, never a wrong answer.
  while (!recent_.empty() && recent_.back().full_at <= now) {
    index_.erase(recent_.back().who);
    recent_.pop_back();
  }
}

rate_limiter::bucket& rate_limiter::find_or_add(const std::string& who, const rate_limit& limit, time_point now) {
  if (auto it = index_.find(who); it != index_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second);
    return recent_.front();
  }
  if (index_.size() >= max_entries_ && !recent_.empty()) {
    index_.erase(recent_.back().who);
    recent_.pop_back();
  }
  recent_.push_front(bucket{who, static_cast<double>(limit.burst), now, now});
  index_[who] = recent_.begin();
  return recent_.front();
}

rate_limiter::bucket& rate_limiter::refilled(const std::string& who, const rate_limit& limit, time_point now) {
  bucket& b = find_or_add(who, limit, now);
  // A clock that went back refills nothing (and does not freeze the bucket until it catches up).
  b.tokens = std::min(static_cast<double>(limit.burst), b.tokens + seconds_between(b.last, now) * limit.rate_per_s);
  b.last = now;
  return b;
}

namespace {

long long seconds_until_a_token(double tokens, const rate_limit& limit) {
  if (tokens >= 1) return 0;
  return std::max(1LL, static_cast<long long>(std::ceil((1 - tokens) / limit.rate_per_s)));
}

time_point when_full(time_point now, double tokens, const rate_limit& limit) {
  return after(now, (static_cast<double>(limit.burst) - tokens) / limit.rate_per_s);
}

}  // namespace

rate_limiter::decision rate_limiter::admit(const std::string& who, const rate_limit& limit) {
  if (limit.rate_per_s <= 0) return {};
  const time_point now = clk_.now();
  drop_refilled(now);
  bucket& b = refilled(who, limit, now);
  decision d;
  if (b.tokens >= 1) {
    b.tokens -= 1;
  } else {
    d.allowed = false;
    d.retry_after_s = seconds_until_a_token(b.tokens, limit);
  }
  b.full_at = when_full(now, b.tokens, limit);
  return d;
}

const rate_limit& rate_limiter::org_limit_for(const auth::principal& p) const {
  static const rate_limit unlimited{};
  return p.superadmin ? unlimited : limits_.org;
}

rate_limiter::decision rate_limiter::admit(const std::string& who, const rate_limit& limit, const std::string& org,
                                           const rate_limit& org_limit) {
  if (org_limit.rate_per_s <= 0) return admit(who, limit);
  if (limit.rate_per_s <= 0) {
    auto d = admit(org, org_limit);
    d.by_org = !d.allowed;
    return d;
  }
  const time_point now = clk_.now();
  drop_refilled(now);
  // The organization's first: the principal's find_or_add moves it to the front, so it can only
  // evict a bucket behind both (max_entries is at least 2).
  bucket& o = refilled(org, org_limit, now);
  bucket& k = refilled(who, limit, now);
  decision d;
  if (k.tokens >= 1 && o.tokens >= 1) {
    k.tokens -= 1;
    o.tokens -= 1;
  } else {
    const long long key_wait = seconds_until_a_token(k.tokens, limit);
    const long long org_wait = seconds_until_a_token(o.tokens, org_limit);
    d.allowed = false;
    d.retry_after_s = std::max(key_wait, org_wait);
    d.by_org = org_wait >= key_wait;
  }
  k.full_at = when_full(now, k.tokens, limit);
  o.full_at = when_full(now, o.tokens, org_limit);
  return d;
}

}  // namespace sandfort::api
