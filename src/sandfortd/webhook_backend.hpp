#pragma once
// The daemon's side of api::webhook_backend: webhooks stored with their signing secret sealed by
// the secrets key, each URL checked against the address policy, each change in the
// organization's audit chain (destination only, never the path, query or secret), and the
// delivery worker woken (docs/events.md, "Webhooks").

#include <memory>

#include "sandfort/api/backends.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/proxy/proxy.hpp"
#include "sandfort/secrets/sealing.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/webhooks/dispatcher.hpp"

namespace sandfort::daemon {

std::unique_ptr<api::webhook_backend> make_webhook_backend(const config& cfg, store::database& db,
                                                           audit::journal& journal, const clock& clk,
                                                           const secrets::sealing_key& key,
                                                           proxy::name_resolver& resolver,
                                                           webhooks::dispatcher& worker);

}  // namespace sandfort::daemon
