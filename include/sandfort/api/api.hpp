#pragma once
// The REST API: one route registry (method, pattern, permission, kind, handler), its tables kept
// per resource; each handler parses, calls a backend (backends.hpp), serializes. Authentication and the role
// check happen once, at dispatch, from the permission each route declares.

#include "sandfort/api/backends.hpp"
#include "sandfort/api/event_hub.hpp"
#include "sandfort/api/rate_limiter.hpp"
#include "sandfort/audit/signing.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/http/router.hpp"
#include "sandfort/http/stream.hpp"
#include "sandfort/sandbox/answer_workers.hpp"

namespace sandfort::api {

// What the routes are given: the backends they call (backends.hpp), by role, and the API's own parts.
struct dependencies {
  const config& cfg;
  request_gate& gate;  // authentication, the 401s and 429s counted, the state disk's admission
  sandbox_backend& sandboxes;
  command_backend& commands;
  volume_backend& volumes;
  snapshot_backend& snapshots;
  identity_backend& identity;
  audit_backend& audit;
  guardrail_backend& guardrails;
  daemon_backend& daemon;
  secret_backend& secrets;
  webhook_backend& webhooks;
  const audit::signing_key& audit_key;
  rate_limiter& limiter;                    // per-key token buckets, one token per authenticated request
  sandbox::answer_workers& answer_workers;  // encodes large exec results off the I/O thread
  event_hub& events;                        // GET /v1/events: woken as audit chains grow, its bounds
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
