#pragma once
// Private to the api module: the shape of an authenticated route and the route tables.

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <vector>

#include "sandfort/api/api.hpp"
#include "sandfort/auth/keys.hpp"

namespace sandfort::api {

using authed_handler = std::function<boost::asio::awaitable<http::response>(http::context&, const auth::principal&)>;

struct api_route {
  http::verb method;
  std::string pattern;
  std::optional<auth::permission> needs;  // nullopt: no authentication at all
  authed_handler fn;
};

std::vector<api_route> health_routes(dependencies& deps);
std::vector<api_route> identity_routes(dependencies& deps);
std::vector<api_route> sandbox_routes(dependencies& deps);
std::vector<api_route> audit_routes(dependencies& deps);
std::vector<api_route> guardrail_routes(dependencies& deps);
std::vector<api_route> volume_routes(dependencies& deps);
std::vector<api_route> snapshot_routes(dependencies& deps);
std::vector<api_route> pool_routes(dependencies& deps);
std::vector<api_route> metrics_routes(dependencies& deps);

// Request metrics (metrics_routes.cpp): sandfort_http_requests_total and
// sandfort_http_request_duration_seconds, labelled by route pattern (never the path: ids would
// make a series per sandbox), method and status. `status` 0: relayed from the agent unread.
void observe_request(const std::string& route, http::verb method, unsigned status, double seconds);

// How the audit chain names the caller of a request.
audit::actor actor_of(const auth::principal& p, const std::string& request_id, const std::string& remote);

// While the state directory's disk is full (docs/limits.md, "A full state disk"): reads go on;
// what frees space or ends harm (every DELETE, stopping sandboxes, disabling an organization)
// runs while the store's reserve lasts; every other request that acts (a terminal too, though it
// is a GET) is refused with insufficient_storage before it starts, so none is left half made.
result<void> admit_on_state_disk(dependencies& deps, http::verb method, std::string_view route);

// A refusal (401) is counted for the audit chain's auth.failures records, by client address.
boost::asio::awaitable<result<auth::principal>> authorize(dependencies& deps, std::string bearer,
                                                         auth::permission needs, std::string request_id,
                                                         std::string remote);

}  // namespace sandfort::api
