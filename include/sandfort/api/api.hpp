#pragma once
// The REST API: one route registry (method, pattern, permission, kind, handler), its tables kept
// per resource; each handler parses, calls a service, serializes. Authentication and the role
// check happen once, at dispatch, from the permission each route declares.

#include "sandfort/api/background_reader.hpp"
#include "sandfort/api/rate_limiter.hpp"
#include "sandfort/audit/failure_summary.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/audit/rate_limit_summary.hpp"
#include "sandfort/audit/signing.hpp"
#include "sandfort/auth/oidc.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/http/router.hpp"
#include "sandfort/http/stream.hpp"
#include "sandfort/sandbox/service.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::api {

struct dependencies {
  const config& cfg;
  store::database& db;
  sandbox::service& sandboxes;
  const clock& clk;
  auth::authenticator& authn;
  audit::journal& journal;
  const audit::signing_key& audit_key;
  audit::failure_summary& auth_failures;  // every 401, counted into the audit chain
  background_reader& reader;              // long reads of the audit log, off the I/O thread
  rate_limiter& limiter;                  // per-key token buckets, one token per authenticated request
  audit::rate_limit_summary& rate_refusals;  // every 429 rate_limited, counted into the audit chain
  sandbox::answer_workers& answer_workers;   // encodes large exec results off the I/O thread
};

// The handler the HTTP server calls for every request.
http::handler make_handler(dependencies deps);
// The routes that stream (server-sent events, file bodies, WebSockets, agent forwarding).
http::stream_selector make_stream_selector(dependencies deps);
// The registry as data, for `sandfortd routes --json` and the tests that compare it with the
// documents: [{method, pattern, permission (null: no authentication), role (the least that holds
// it, "none" without authentication), kind (buffered, streamed, forwarded)}], in matching order.
nlohmann::json describe_routes();

}  // namespace sandfort::api
