#pragma once
// The daemon's periodic audit work: every organization's chain head signed now and then every
// audit.checkpoint_interval_s, and once more at shutdown; authentication failures written as
// counted records every audit.summary_interval_s.

#include <boost/asio/awaitable.hpp>

#include "sandfort/audit/failure_summary.hpp"
#include "sandfort/audit/signing.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::daemon {

// Runs on the I/O thread; ends when `stopping` is seen (or with the io_context).
boost::asio::awaitable<void> checkpoint_forever(store::database& db, const audit::signing_key& key, const clock& clk,
                                                const audit_config& cfg, const bool& stopping);

// Writes the counted authentication failures every audit.summary_interval_s (and once more when
// called after `stopping`).
boost::asio::awaitable<void> summarize_failures_forever(audit::failure_summary& failures, const audit_config& cfg,
                                                        const bool& stopping);
void summarize_failures_once(audit::failure_summary& failures);

// One round, logged: what was signed, or why an organization was not.
void checkpoint_once(store::database& db, const audit::signing_key& key, const clock& clk, const audit_config& cfg);

}  // namespace sandfort::daemon
