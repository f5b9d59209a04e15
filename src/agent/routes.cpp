#include "routes.hpp"

#include <unistd.h>

#include "claim/routes.hpp"
#include "sandfort/version.hpp"
#include "fs/routes.hpp"
#include "git/routes.hpp"
#include "interpreter/routes.hpp"
#include "ports/forward.hpp"
#include "ports/routes.hpp"
#include "commands/routes.hpp"
#include "process/exec_json.hpp"
#include "exec_stream.hpp"
#include "process/runner.hpp"
#include "pty/routes.hpp"
#include "session/routes.hpp"
#include "session/session.hpp"

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;

// The one readiness signal: sandfortd polls this until it answers.
asio::awaitable<http::response> health(http::context&) {
  co_return http::json_response(200, {{"status", "ok"}, {"version", sandfort::version}, {"pid", ::getpid()}});
}

asio::awaitable<http::response> exec(http::context& ctx) {
  auto call = parse_exec_call(ctx.req.body());
  if (!call) co_return http::error_response(call.err(), ctx.request_id);
  const auto& limits = sessions::current_limits();
  hold_to_limits(call->request, limits.max_timeout, limits.output_cap);
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
  for (auto& r : session_routes()) all.push_back(std::move(r));
  for (auto& r : command_routes()) all.push_back(std::move(r));
  for (auto& r : fs::routes()) all.push_back(std::move(r));
  for (auto& r : ports::routes()) all.push_back(std::move(r));
  for (auto& r : git::routes()) all.push_back(std::move(r));
  for (auto& r : claim::routes()) all.push_back(std::move(r));
  for (auto& r : interpreter::routes()) all.push_back(std::move(r));
  return all;
}

std::vector<stream_route> stream_routes() {
  std::vector<stream_route> all;
  // Each capability adds its own table here (one line each).
  for (auto& r : process_stream_routes()) all.push_back(std::move(r));
  for (auto& r : session_stream_routes()) all.push_back(std::move(r));
  for (auto& r : command_stream_routes()) all.push_back(std::move(r));
  for (auto& r : fs::stream_routes()) all.push_back(std::move(r));
  for (auto& r : pty::stream_routes()) all.push_back(std::move(r));
  for (auto& r : ports::stream_routes()) all.push_back(std::move(r));
  for (auto& r : interpreter::stream_routes()) all.push_back(std::move(r));
  return all;
}

}  // namespace sandfort::agent
