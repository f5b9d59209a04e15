#pragma once
// What GET /v1/events waits on (docs/events.md): told by the store of every life-cycle event
// committed (store::append_observer), it wakes the streams of that organization; it also holds the bounds on
// how many streams there are. One per daemon, on the I/O thread.

#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::api {

struct event_stream_bounds {
  std::size_t per_org = 32;    // streams open at once for one organization
  std::size_t per_source = 8;  // … from one client address
};

class event_hub final : public store::append_observer {
 public:
  using bounds = event_stream_bounds;
  explicit event_hub(bounds b = {}) : bounds_(b) {}
  event_hub(const event_hub&) = delete;
  event_hub& operator=(const event_hub&) = delete;

  void appended(const std::string& org_id, std::int64_t seq) override;
  // Told of every append too, after the streams (the webhook worker's wake-up): the same rules as
  // appended() — inside the commit, so it must only note and wake.
  void also_tell(std::function<void(const std::string& org_id, std::int64_t seq)> listener) {
    listener_ = std::move(listener);
  }

  // The highest seq told for org since the daemon started (0 when none): a stream whose cursor is
  // below it has events to read, without waiting.
  std::int64_t latest(const std::string& org_id) const;

  // A stream's place, counted against the bounds while it lives: its `bell` is cancelled whenever
  // the organization's chain grows.
  class subscription {
   public:
    subscription(event_hub& hub, std::string org_id, std::string source, boost::asio::steady_timer& bell)
        : hub_(hub), org_id_(std::move(org_id)), source_(std::move(source)), bell_(bell) {}
    ~subscription();
    subscription(const subscription&) = delete;
    subscription& operator=(const subscription&) = delete;

   private:
    friend class event_hub;
    event_hub& hub_;
    std::string org_id_;
    std::string source_;
    boost::asio::steady_timer& bell_;
  };
  // quota_exceeded when org or source has as many streams as the bounds allow.
  result<std::unique_ptr<subscription>> subscribe(const std::string& org_id, const std::string& source,
                                                  boost::asio::steady_timer& bell);

  std::size_t streams() const;

  // Shutdown: every stream is woken to end, and no new one is taken (unavailable).
  void close_all();
  bool closing() const { return closing_; }

 private:
  struct org_streams {
    std::int64_t latest = 0;
    std::vector<subscription*> open;
  };
  void leave(subscription& s);

  bounds bounds_;
  std::function<void(const std::string&, std::int64_t)> listener_;
  bool closing_ = false;
  std::map<std::string, org_streams> orgs_;
  std::map<std::string, std::size_t> per_source_;
};

}  // namespace sandfort::api
