#pragma once
// Every series sandfortd exposes, in one place: the modules that see an event report it through
// these (in the process's registry), and GET /metrics registers them all before its first
// answer, so that a family is listed (and rate() has its zero) before its first event.
// docs/api.md ("Metrics") describes them.

#include "sandfort/metrics/registry.hpp"

namespace sandfort::metrics {

// api: every request, by route pattern (never the path), method and status code.
counter_family& http_requests();            // sandfort_http_requests_total{route,method,code}
histogram_family& http_request_duration();  // sandfort_http_request_duration_seconds{route,method}
// sandbox: commands through the agent (exec and code-run): mode whole|stream, outcome ok|error.
histogram_family& exec_duration();          // sandfort_exec_duration_seconds{mode,outcome}
// proxy: one per answer of the egress proxy (egress_decision_names), and connections closed at accept.
counter_family& egress_decisions();         // sandfort_egress_decisions_total{decision}
// docker: Engine API calls by operation (container_create, image_pull…), outcome ok|error|unreachable.
histogram_family& docker_request_duration();  // sandfort_docker_request_duration_seconds{operation,outcome}
// Computed when scraped.
gauge_family& sandboxes_by_state();  // sandfort_sandboxes{state}
gauge_family& pool_target_size();    // sandfort_pool_target_size{image,cpus,memory_mb,pids}
gauge_family& pool_ready();          // sandfort_pool_ready{image,cpus,memory_mb,pids}
gauge_family& build_info();          // sandfort_build_info{version} 1

inline constexpr const char* egress_decision_names[] = {
    "allowed", "denied", "unauthenticated", "rate_limited", "over_capacity",
    "bad_request", "upstream_error", "client_gone", "closed_at_accept"};

// Registers every family above in the default registry (idempotent).
void register_catalog();

}  // namespace sandfort::metrics
