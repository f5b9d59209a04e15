#pragma once
// The daemon's periodic audit work: every organization's chain head signed now and then every
// audit.checkpoint_interval_s, and once more at shutdown; authentication failures, egress
// decisions and rate-limit refusals written as counted records every audit.summary_interval_s.

#include <boost/asio/awaitable.hpp>

#include "sandfort/api/background_reader.hpp"
#include "sandfort/audit/egress_summary.hpp"
#include "sandfort/audit/failure_summary.hpp"
#include "sandfort/audit/rate_limit_summary.hpp"
#include "sandfort/audit/signing.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::daemon {

// Runs on the I/O thread, re-hashing on the background reader; ends when `stopping` is seen (or
// with the io_context).
boost::asio::awaitable<void> checkpoint_forever(store::database& db, api::background_reader& reader,
                                                const audit::signing_key& key, const clock& clk,
                                                const audit_config& cfg, const bool& stopping);

// The counted records (authentication failures, egress decisions, rate-limit refusals), written every
// audit.summary_interval_s until `stopping`; summarize_once() once more at shutdown.
struct summaries {
  audit::failure_summary& auth_failures;
  audit::egress_summary& egress;
  audit::rate_limit_summary& rate_limits;
};
boost::asio::awaitable<void> summarize_forever(summaries s, const audit_config& cfg, const bool& stopping);
void summarize_once(summaries s);

// One round on the I/O thread alone (at shutdown), logged: what was signed, or why an
// organization was not.
void checkpoint_once(store::database& db, const audit::signing_key& key, const clock& clk, const audit_config& cfg);

}  // namespace sandfort::daemon
