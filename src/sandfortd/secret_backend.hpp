#pragma once
// The daemon's side of api::secret_backend: organization secrets sealed with the secrets key
// (secrets.key_file) into the store, each change in the organization's audit chain with name and
// hosts only, and each organization's interception CA made on first need (docs/secrets.md).

#include <memory>

#include "sandfort/api/backends.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/secrets/sealing.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::daemon {

std::unique_ptr<api::secret_backend> make_secret_backend(const config& cfg, store::database& db, audit::journal& journal,
                                                         const clock& clk, const secrets::sealing_key& key);

}  // namespace sandfort::daemon
