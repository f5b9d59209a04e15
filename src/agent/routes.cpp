#include "routes.hpp"

#include <unistd.h>

#include "process/exec_json.hpp"
#include "process/runner.hpp"

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;

// The one readiness signal: sandfortd polls this until it answers.
asio::awaitable<http::response> health(http::context&) {
  co_return http::json_response(200, {{"status", "ok"}, {"version", SANDFORT_AGENT_VERSION}, {"pid", ::getpid()}});
}

asio::awaitable<http::response> exec(http::context& ctx) {
  auto call = parse_exec_call(ctx.req.body());
  if (!call) co_return http::error_response(call.err(), ctx.request_id);
  auto done = co_await run(std::move(call->request));
  if (!done) co_return http::error_response(done.err(), ctx.request_id);
  co_return http::json_response(200, to_json(*done, call->binary));
}

}  // namespace

std::vector<http::route> routes() {
  std::vector<http::route> all = {
      {http::verb::get, "/health", &health},
      {http::verb::post, "/process/exec", &exec},
  };
  // Each capability adds its own table here (one line each).
  // [session routes]
  // [command routes]
  // [fs routes]
  // [ports routes]
  return all;
}

std::vector<stream_route> stream_routes() {
  std::vector<stream_route> all;
  // Each capability adds its own table here (one line each).
  // [process stream routes]
  // [session stream routes]
  // [command stream routes]
  // [fs stream routes]
  // [pty stream routes]
  return all;
}

}  // namespace sandfort::agent
