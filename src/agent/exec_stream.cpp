#include "exec_stream.hpp"

#include "process/child.hpp"
#include "process/exec_json.hpp"
#include "process/runner.hpp"
#include "process/sse.hpp"
#include "sandfort/http/server.hpp"
#include "session/session.hpp"

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;

asio::awaitable<bool> exec_events(http::exchange& ex) {
  const std::size_t limit = http::server_options{}.body_limit;
  auto body = co_await http::read_small_body(ex, limit);
  if (!body) {
    error e = body.err();
    co_return co_await http::respond_error(ex, e);
  }
  auto call = parse_exec_call(*body);
  if (!call) {
    error e = call.err();
    co_return co_await http::respond_error(ex, e);
  }
  const auto& limits = sessions::current_limits();
  hold_to_limits(call->request, limits.max_timeout, limits.output_cap);
  // What can be refused is refused before the stream starts, with its own status.
  if (auto valid = validate(call->request); !valid) {
    error e = valid.err();
    co_return co_await http::respond_error(ex, e);
  }
  sse_writer events(ex, call->binary);
  if (events.gone_now() || !co_await events.begin()) co_return false;
  call->request.sink = &events;
  auto done = co_await run(std::move(call->request));
  if (!done) {
    nlohmann::json failure = error_json(done.err());
    if (!co_await events.send("error", failure)) co_return false;
    co_return co_await events.finish();
  }
  // Nobody to tell: the command was killed and reaped when its reader left.
  if (done->abandoned || events.failed()) co_return false;
  nlohmann::json summary = {{"exit_code", done->exit_code},
                         {"timed_out", done->timed_out},
                         {"truncated", done->truncated},
                         {"duration_ms", done->duration.count()},
                         {"oom_killed", done->oom_killed.value_or(false)}};
  if (!co_await events.send("exit", summary)) co_return false;
  co_return co_await events.finish();
}

}  // namespace

std::vector<http::stream_route> process_stream_routes() {
  return {{http::verb::post, "/process/exec", &exec_events, &http::wants_event_stream}};
}

}  // namespace sandfort::agent
