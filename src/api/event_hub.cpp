#include "sandfort/api/event_hub.hpp"

#include <algorithm>

namespace sandfort::api {

void event_hub::appended(const std::string& org_id, std::int64_t seq) {
  // Remembered for an organization nobody follows yet too (one entry per organization), so that
  // a stream opened later compares its cursor with it.
  auto& org = orgs_[org_id];
  org.latest = std::max(org.latest, seq);
  // Cancelling a timer only queues its waiter: it runs after this commit has returned.
  for (auto* s : org.open) s->bell_.cancel();
  if (listener_) listener_(org_id, seq);
}

std::int64_t event_hub::latest(const std::string& org_id) const {
  auto it = orgs_.find(org_id);
  return it == orgs_.end() ? 0 : it->second.latest;
}

result<std::unique_ptr<event_hub::subscription>> event_hub::subscribe(const std::string& org_id,
                                                                      const std::string& source,
                                                                      boost::asio::steady_timer& bell) {
  if (closing_) return make_error(errc::unavailable, "sandfortd is shutting down");
  auto& org = orgs_[org_id];
  if (org.open.size() >= bounds_.per_org)
    return make_error(errc::quota_exceeded, "this organization has " + std::to_string(bounds_.per_org) +
                                                " event streams open already; close one first");
  auto& from_source = per_source_[source];
  if (from_source >= bounds_.per_source)
    return make_error(errc::quota_exceeded, "this client address has " + std::to_string(bounds_.per_source) +
                                                " event streams open already; close one first");
  ++from_source;
  auto s = std::make_unique<subscription>(*this, org_id, source, bell);
  org.open.push_back(s.get());
  return s;
}

void event_hub::close_all() {
  closing_ = true;
  for (auto& [id, org] : orgs_)
    for (auto* s : org.open) s->bell_.cancel();
}

std::size_t event_hub::streams() const {
  std::size_t n = 0;
  for (const auto& [id, org] : orgs_) n += org.open.size();
  return n;
}

void event_hub::leave(subscription& s) {
  if (auto it = orgs_.find(s.org_id_); it != orgs_.end()) std::erase(it->second.open, &s);
  if (auto it = per_source_.find(s.source_); it != per_source_.end() && --it->second == 0) per_source_.erase(it);
}

event_hub::subscription::~subscription() { hub_.leave(*this); }

}  // namespace sandfort::api
