// GET /metrics: Prometheus's text exposition format, for the operator. It spans every
// organization (sandboxes by state, the pool, every route's traffic), so it takes the
// superadmin's key like /v1/pool; Prometheus sends it from a credentials file (docs/api.md).
// Counters and histograms are kept as things happen, by the modules that see them
// (sandfort/metrics/catalog.hpp); the gauges here are computed when Prometheus asks.
#include <spdlog/spdlog.h>

#include "routes.hpp"
#include "sandfort/metrics/catalog.hpp"
#include "sandfort/metrics/process.hpp"
#include "sandfort/version.hpp"

namespace sandfort::api {

using boost::asio::awaitable;

namespace {

// Every live state, so that one that empties reads 0 instead of vanishing.
constexpr const char* live_states[] = {"creating", "pulling", "started", "paused", "stopped", "error"};

void update_sandbox_states(daemon_backend& daemon) {
  auto& by_state = metrics::sandboxes_by_state();
  auto counts = daemon.sandboxes_by_state();
  by_state.clear();
  if (!counts) {
    // Left out of this scrape rather than failing it: the rest is still worth having.
    spdlog::warn("metrics: counting sandboxes by state: {}", counts.err().message);
    return;
  }
  for (const char* s : live_states) by_state.set({s}, 0);
  for (const auto& [state, n] : *counts) by_state.set({state}, static_cast<double>(n));
}

// Pools come from the configuration: a handful of series at most.
void update_pools(const daemon_backend& daemon) {
  auto& target = metrics::pool_target_size();
  auto& ready = metrics::pool_ready();
  target.clear();
  ready.clear();
  for (const auto& p : daemon.pools()) {
    metrics::label_values pool = {p.image, metrics::format_value(p.resources.cpus),
                                  std::to_string(p.resources.memory_mb), std::to_string(p.resources.pids)};
    target.set(pool, p.target);
    ready.set(pool, p.ready);
  }
}

}  // namespace

void observe_request(const std::string& route, http::verb method, unsigned status, double seconds) {
  // to_string, not the request's method text: an unknown verb is "<unknown>", not whatever was sent.
  const std::string m(http::bhttp::to_string(method));
  metrics::http_requests().inc({route, m, status == 0 ? "relayed" : std::to_string(status)});
  metrics::http_request_duration().observe({route, m}, seconds);
}

void register_metrics() {
  metrics::register_catalog();  // every family listed from the first scrape on
  metrics::build_info().set({sandfort::version}, 1);
}

std::vector<api_route> metrics_routes() {
  return {
      {http::verb::get, "/metrics", auth::permission::superadmin,
       [](dependencies& deps, http::context& ctx, const auth::principal&) -> awaitable<http::response> {
         metrics::update_process_metrics(metrics::default_registry(), metrics::read_process_stats());
         update_sandbox_states(deps.daemon);
         update_pools(deps.daemon);
         http::response res{http::bhttp::status::ok, ctx.req.version()};
         res.set(http::bhttp::field::content_type, metrics::content_type);
         res.set(http::bhttp::field::cache_control, "no-store");
         res.body() = metrics::default_registry().render();
         res.prepare_payload();
         co_return res;
       }},
  };
}

}  // namespace sandfort::api
