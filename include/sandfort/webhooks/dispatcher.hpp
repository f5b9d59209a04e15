#pragma once
// The delivery worker (docs/events.md, "Webhooks"): one per daemon, on the I/O thread. The outbox
// is the audit chain. For each enabled webhook it takes the next life-cycle event after the
// webhook's cursor (filtered by its types) into a pending delivery row and moves the cursor, in
// one transaction; then POSTs it, signed, and writes the outcome over the row. One attempt in
// flight per webhook (events reach a receiver in the chain's order) and `concurrency` in all. A
// failed attempt is retried with exponential backoff and jitter until the event is max_age old,
// then the row is `failed` and the next event is taken. Cursors and pending rows are in SQLite:
// after a restart the worker goes on where it was (at least once: an attempt cut off by the
// restart is made again).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/proxy/policy.hpp"
#include "sandfort/secrets/sealing.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/webhook_store.hpp"
#include "sandfort/webhooks/signing.hpp"

namespace sandfort::webhooks {

// The associated data a webhook's signing secret is sealed with: bound to its organization and id.
std::string secret_aad(std::string_view org_id, std::string_view webhook_id);

struct dispatcher_options {
  retry_policy retry;
  std::size_t concurrency = 4;                     // attempts in flight, all webhooks together
  std::chrono::milliseconds timeout{10'000};       // one attempt, resolve to response
  std::chrono::milliseconds poll_interval{5'000};  // a round without being woken
  std::chrono::seconds log_retention{604'800};     // finished rows older than this are pruned
  std::uint64_t response_limit = 64u << 10;        // a receiver's answer is read up to this, then cut
  std::vector<proxy::cidr> allowed_ranges;         // webhooks.allowed_ranges
  std::string ca_file;                             // empty: the system's trust store
};

class dispatcher {
 public:
  // `jitter` gives a number in [0, 1) per retry (a seam for tests; random by default).
  dispatcher(boost::asio::any_io_executor ex, dispatcher_options o, store::database& db,
             const secrets::sealing_key& key, const clock& clk, std::function<double()> jitter = {});
  dispatcher(const dispatcher&) = delete;
  dispatcher& operator=(const dispatcher&) = delete;

  // A webhook made or changed, an attempt ended: look at every webhook again now.
  void wake();
  // An audit event committed in org_id's chain: look at that organization's webhooks now (a
  // round woken only by appends reads nothing for the other organizations).
  void wake(const std::string& org_id);
  // Rounds until stop(); an attempt in flight then is abandoned (its row stays pending).
  boost::asio::awaitable<void> run();
  void stop();

  std::size_t in_flight() const { return in_flight_; }
  const proxy::egress_policy& policy() const { return policy_; }

 private:
  using webhook_key = std::pair<std::string, std::string>;  // org, webhook
  // One pass over the enabled webhooks (only those of `orgs` when given); returns when the
  // earliest pending row is due (unix ms).
  std::optional<std::int64_t> round(const std::set<std::string>* orgs);
  // The next event after the webhook's cursor, taken into a pending row; nullopt: none yet.
  std::optional<store::webhook_delivery> take_next(const store::webhook_record& w, bool& more);
  boost::asio::awaitable<void> attempt(store::webhook_record w, store::webhook_delivery d);
  std::int64_t now_ms() const;

  boost::asio::any_io_executor ex_;
  dispatcher_options o_;
  store::database& db_;
  store::webhook_store store_;
  const secrets::sealing_key& key_;
  const clock& clk_;
  std::function<double()> jitter_;
  proxy::egress_policy policy_;
  boost::asio::steady_timer bell_;
  bool stopping_ = false;
  bool woken_ = false;       // since the round began
  bool everything_ = true;   // the next round visits every webhook
  std::set<std::string> appended_;  // organizations whose chain grew since the round began
  std::optional<std::int64_t> full_due_;  // the earliest retry the last full round saw
  std::set<webhook_key> busy_;
  std::size_t in_flight_ = 0;
  std::int64_t last_prune_ms_ = 0;
};

}  // namespace sandfort::webhooks
