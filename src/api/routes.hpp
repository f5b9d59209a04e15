#pragma once
// Private to the api module: the route registry. Every route the API serves is one entry —
// method, pattern, the permission it needs, how it is answered, its handler — and one guard
// (api.cpp) applies the entry's permission at dispatch; no handler checks a role itself.

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "sandfort/api/api.hpp"
#include "sandfort/auth/keys.hpp"
#include "sandfort/http/proxy.hpp"

namespace sandfort::api {

// How a route is answered.
enum class route_kind {
  buffered,   // the body is read whole (up to max_body_bytes), the handler returns the response
  streamed,   // the handler owns the connection and writes its answer itself (exec, code-run)
  forwarded,  // relayed to the sandbox's agent: bodies in pieces, WebSockets spliced
};
std::string to_string(route_kind k);

// What a streamed or forwarded handler is given beside the exchange.
struct stream_call {
  const auth::principal& who;
  const std::string& subprotocol;  // a browser's `bearer.<token>` WebSocket subprotocol, to echo
  unsigned& status;                // what it answered, for the request metrics; 0: the agent's, relayed unread
  void answered(unsigned s) { status = s; }
  void answered(const error& e) { status = static_cast<unsigned>(http_status(e.code)); }
};

// How a route's caller and its refusals are spelled on the wire: the native API's when a route
// names none; a compatibility layer (src/compat/e2b) names its own. The guard is the same.
struct route_dialect {
  // Empty: `Authorization: Bearer <key>`. Else the header whose whole value is the key (X-API-KEY).
  std::string key_header;
  // The refusal's body and status (a guard's 401/403/429, a handler's error).
  std::function<http::response(const error&, const std::string& request_id)> refuse;
};

using buffered_handler =
    std::function<boost::asio::awaitable<http::response>(dependencies&, http::context&, const auth::principal&)>;
using streamed_handler = std::function<boost::asio::awaitable<bool>(dependencies&, http::exchange&, stream_call&)>;

struct api_route {
  // A buffered route; `needs` nullopt: no authentication at all.
  api_route(http::verb m, std::string p, std::optional<auth::permission> n, buffered_handler h)
      : method(m), pattern(std::move(p)), needs(n), kind(route_kind::buffered), answer(std::move(h)) {}
  // A streamed or forwarded route: authenticated by the guard; `needs` nullopt only where the
  // handler checks a credential of its own first (the E2B sandbox plane's access token).
  api_route(http::verb m, std::string p, std::optional<auth::permission> n, route_kind k, streamed_handler h)
      : method(m), pattern(std::move(p)), needs(n), kind(k), stream(std::move(h)) {}

  http::verb method;
  std::string pattern;
  std::optional<auth::permission> needs;
  route_kind kind;
  buffered_handler answer;  // kind buffered
  streamed_handler stream;  // kind streamed or forwarded
  std::shared_ptr<const route_dialect> dialect;  // null: the native API's
};

// Every route, in the order they are matched. Needs no dependencies: handlers are given them
// when called, so the registry can be listed (`sandfortd routes`) and tested without a daemon.
std::vector<api_route> route_registry();
// A table added by a module outside api (src/compat/e2b), read after the native ones: registered
// once at start, before the registry is first read, by the daemon.
void add_route_table(std::vector<api_route> (*table)());

std::vector<api_route> health_routes();
std::vector<api_route> identity_routes();
std::vector<api_route> sandbox_routes();
std::vector<api_route> stream_routes();
std::vector<api_route> audit_routes();
std::vector<api_route> event_routes();
std::vector<api_route> guardrail_routes();
std::vector<api_route> volume_routes();
std::vector<api_route> snapshot_routes();
std::vector<api_route> pool_routes();
std::vector<api_route> metrics_routes();
std::vector<api_route> console_routes();
std::vector<api_route> secret_routes();
std::vector<api_route> webhook_routes();

// GET /v1/whoami's body, which the console's session answers too.
nlohmann::json whoami_json(const auth::principal& p);

// The guard's permission step: whether `who` may call `r` (permission_denied if not).
result<void> permits(const api_route& r, const auth::principal& who);

// The one guard, in front of every route of every kind: authentication (a 401 is counted for
// the audit chain's auth.failures records, by client address), the rate limit, the route's
// permission, the console's CSRF rule for a request that came with its cookie (console_csrf.hpp),
// then the state disk (admit_on_state_disk). A route that needs no authentication passes with an
// empty principal.
boost::asio::awaitable<result<auth::principal>> guard(dependencies& deps, const api_route& r, std::string bearer,
                                                     const http::bhttp::fields& headers, std::string request_id,
                                                     std::string remote);

// The organization a request names (by id or name, `named`): the caller's own when it names
// none or its own; any other one for the superadmin only. Another organization is not_found to
// everyone else, like any other organization's resource. Whether a deleted organization may be
// named is each use's to say: its audit chain outlives it (reading it is the superadmin's
// right), its limits and sandboxes do not.
enum class deleted_orgs { refused, allowed };
struct named_org {
  std::string id;
  bool deleted = false;
};
using org_lookup = std::function<result<named_org>(const std::string& id_or_name)>;
result<std::string> resolve_target_org(const org_lookup& find, const auth::principal& p, const std::string& named,
                                       deleted_orgs deleted);
// The same over the identity backend.
result<std::string> resolve_target_org(dependencies& deps, const auth::principal& p, const std::string& named,
                                       deleted_orgs deleted);

// Every metric family registered, so that all are listed from the first scrape on (metrics_routes.cpp).
void register_metrics();

// Request metrics (metrics_routes.cpp): sandfort_http_requests_total and
// sandfort_http_request_duration_seconds, labelled by route pattern (never the path: ids would
// make a series per sandbox), method and status. `status` 0: relayed from the agent unread.
void observe_request(const std::string& route, http::verb method, unsigned status, double seconds);

// What a forwarded request that acts is called in the audit chain: "sandbox.files.put",
// "sandbox.sessions.exec", "sandbox.pty" (the agent path's words, ids and names left out).
std::string forwarded_action(http::verb method, const std::string& agent_path);

// Forwards the request to the sandbox's agent over `agent` (http::forward) and keeps that
// connection for the sandbox's next request when its answer was read to its end. Returns whether
// the client connection may serve another request.
boost::asio::awaitable<bool> forward_over(dependencies& deps, sandbox::agent_session& agent, http::exchange& ex,
                                          http::forward_options target);

// How the audit chain names the caller of a request.
audit::actor actor_of(const auth::principal& p, const std::string& request_id, const std::string& remote);

// While the state directory's disk is full (docs/limits.md, "A full state disk"): reads go on;
// what frees space or ends harm (every DELETE, stopping sandboxes, disabling an organization)
// runs while the store's reserve lasts; every other request that acts (a terminal too, though it
// is a GET) is refused with insufficient_storage before it starts, so none is left half made.
result<void> admit_on_state_disk(dependencies& deps, http::verb method, std::string_view route);

}  // namespace sandfort::api
