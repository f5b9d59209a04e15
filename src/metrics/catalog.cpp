#include "sandfort/metrics/catalog.hpp"

namespace sandfort::metrics {

namespace {

registry& reg() { return default_registry(); }
std::vector<std::string> pool_labels() { return {"image", "cpus", "memory_mb", "pids"}; }

}  // namespace

counter_family& http_requests() {
  static auto& c = reg().counter(
      "sandfort_http_requests_total",
      "API requests by route pattern, method and status code (code=\"relayed\": the agent's own answer, passed on "
      "unread).",
      {"route", "method", "code"});
  return c;
}

histogram_family& http_request_duration() {
  static auto& h = reg().histogram(
      "sandfort_http_request_duration_seconds",
      "API request latency by route pattern and method, to the end of the response (of the stream, for streamed "
      "routes).",
      {"route", "method"});
  return h;
}

histogram_family& exec_duration() {
  static auto& h = reg().histogram(
      "sandfort_exec_duration_seconds",
      "Commands run through a sandbox's agent (exec and code-run), by mode (whole, stream) and outcome (ok: the "
      "agent answered, whatever the exit code; error: it could not be reached or failed).",
      {"mode", "outcome"});
  return h;
}

counter_family& egress_decisions() {
  static auto& c = [&]() -> counter_family& {
    auto& f = reg().counter(
        "sandfort_egress_decisions_total",
        "Decisions of the egress proxy: allowed, denied (403), unauthenticated (407), rate_limited (429, the "
        "sandbox's tunnel cap), over_capacity (503), bad_request (400), upstream_error (502, 504), client_gone, "
        "closed_at_accept (a flood of unauthenticated connections).",
        {"decision"});
    for (const char* d : egress_decision_names) f.inc({d}, 0);
    return f;
  }();
  return c;
}

histogram_family& docker_request_duration() {
  static auto& h = reg().histogram(
      "sandfort_docker_request_duration_seconds",
      "Docker Engine API calls by operation and outcome (ok; error: an error status; unreachable: no answer).",
      {"operation", "outcome"});
  return h;
}

gauge_family& sandboxes_by_state() {
  static auto& g = reg().gauge("sandfort_sandboxes", "Sandboxes not deleted, by state (all organizations).", {"state"});
  return g;
}

gauge_family& pool_target_size() {
  static auto& g = reg().gauge("sandfort_pool_target_size", "Warm pool: members it keeps ready (its size).", pool_labels());
  return g;
}

gauge_family& pool_ready() {
  static auto& g = reg().gauge("sandfort_pool_ready", "Warm pool: members started and waiting to be claimed.", pool_labels());
  return g;
}

gauge_family& build_info() {
  static auto& g = reg().gauge("sandfort_build_info", "The version of sandfortd that answers.", {"version"});
  return g;
}

void register_catalog() {
  http_requests();
  http_request_duration();
  exec_duration();
  egress_decisions();
  docker_request_duration();
  sandboxes_by_state();
  pool_target_size();
  pool_ready();
  build_info();
}

}  // namespace sandfort::metrics
