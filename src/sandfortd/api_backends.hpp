#pragma once
// The daemon's side of the API's backends (sandfort/api/backends.hpp): each interface the routes
// declare, implemented over sandbox::service, the stores, the audit journal and the
// authenticator. Here, where those concrete parts are made and wired, so that the api module
// knows none of them (docs/architecture.md, "The API declares its backends").

#include <memory>

#include "sandfort/api/api.hpp"
#include "sandfort/api/background_reader.hpp"
#include "sandfort/audit/failure_summary.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/audit/rate_limit_summary.hpp"
#include "sandfort/auth/console_login.hpp"
#include "sandfort/auth/oidc.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/sandbox/service.hpp"
#include "sandfort/secrets/sealing.hpp"
#include "sandfort/proxy/proxy.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/webhooks/dispatcher.hpp"

namespace sandfort::daemon {

// What the adapters are made over; all outlive them.
struct backend_parts {
  const config& cfg;
  store::database& db;
  sandbox::service& sandboxes;
  const clock& clk;
  auth::authenticator& authn;
  audit::journal& journal;
  const audit::signing_key& audit_key;
  audit::failure_summary& auth_failures;
  audit::rate_limit_summary& rate_refusals;
  api::background_reader& reader;  // long reads of the audit log, off the I/O thread
  auth::console_login& console_login;  // the console's sign-in through an identity provider
  const secrets::sealing_key& secrets_key;  // seals secret values and interception CA keys
  proxy::name_resolver& webhook_resolver;   // a webhook URL's host, checked when it is registered
  webhooks::dispatcher& webhook_worker;     // woken when a webhook is made or changed
};

// Every backend the API declares, each an adapter over `parts`.
class api_backends {
 public:
  explicit api_backends(backend_parts parts);
  ~api_backends();
  api_backends(const api_backends&) = delete;
  api_backends& operator=(const api_backends&) = delete;

  api::dependencies dependencies(api::rate_limiter& limiter, sandbox::answer_workers& answer_workers,
                                 api::event_hub& events);

 private:
  backend_parts parts_;
  std::unique_ptr<api::request_gate> gate_;
  std::unique_ptr<api::sandbox_backend> sandboxes_;
  std::unique_ptr<api::command_backend> commands_;
  std::unique_ptr<api::volume_backend> volumes_;
  std::unique_ptr<api::snapshot_backend> snapshots_;
  std::unique_ptr<api::identity_backend> identity_;
  std::unique_ptr<api::audit_backend> audit_;
  std::unique_ptr<api::guardrail_backend> guardrails_;
  std::unique_ptr<api::daemon_backend> daemon_;
  std::unique_ptr<api::secret_backend> secrets_;
  std::unique_ptr<api::webhook_backend> webhooks_;
};

}  // namespace sandfort::daemon
