#include "session/routes.hpp"

#include <boost/asio/this_coro.hpp>
#include <cmath>

#include "process/exec_json.hpp"
#include "process/sse.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/http/server.hpp"
#include "session/session.hpp"

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;
using nlohmann::json;
using session_registry = sessions::registry;


struct session_call {
  sessions::exec_params params;
  bool binary = false;
};

result<std::chrono::milliseconds> parse_timeout(const json& j) {
  auto max = sessions::current_limits().max_timeout;
  auto range = [&](const char* name, std::int64_t max_value) {
    return invalid_argument(std::string(name) + " must be a positive number no greater than " + std::to_string(max_value));
  };
  if (j.contains("timeout_s") && j.contains("timeout_ms")) return invalid_argument("give timeout_s or timeout_ms, not both");
  if (j.contains("timeout_s")) {
    const json& v = j["timeout_s"];
    auto max_s = std::chrono::duration_cast<std::chrono::seconds>(max).count();
    if (!v.is_number()) return range("timeout_s", max_s);
    double s = v.get<double>();
    if (!(s > 0) || s * 1000 > static_cast<double>(max.count())) return range("timeout_s", max_s);
    return std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(s * 1000)));
  }
  if (j.contains("timeout_ms")) {
    const json& v = j["timeout_ms"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > max.count())
      return range("timeout_ms", max.count());
    return std::chrono::milliseconds(v.get<std::int64_t>());
  }
  return std::chrono::milliseconds(0);
}

result<session_call> parse_session_exec(std::string_view body) {
  auto j = parse_object(body);
  if (!j) return std::move(j).err();
  if (auto known = check_fields(*j, {"command", "timeout_s", "timeout_ms", "binary"}); !known)
    return std::move(known).err();
  session_call call;
  if (!j->contains("command") || !(*j)["command"].is_string()) return invalid_argument("command must be a string");
  call.params.command = (*j)["command"].get<std::string>();
  if (call.params.command.empty()) return invalid_argument("command must not be empty");
  auto timeout = parse_timeout(*j);
  if (!timeout) return std::move(timeout).err();
  call.params.timeout = *timeout;
  if (j->contains("binary")) {
    if (!(*j)["binary"].is_boolean()) return invalid_argument("binary must be a boolean");
    call.binary = (*j)["binary"].get<bool>();
  }
  return call;
}

json pid_json(const std::optional<int>& pid) { return pid ? json(*pid) : json(nullptr); }

asio::awaitable<http::response> create_session(http::context& ctx) {
  auto j = parse_object(ctx.req.body());
  if (!j) co_return http::error_response(j.err(), ctx.request_id);
  if (auto known = check_fields(*j, {"name"}); !known) co_return http::error_response(known.err(), ctx.request_id);
  if (!j->contains("name") || !(*j)["name"].is_string())
    co_return http::error_response(invalid_argument("name must be a string"), ctx.request_id);
  auto ex = co_await asio::this_coro::executor;
  auto made = session_registry::of(ex).create(ex, (*j)["name"].get<std::string>());
  if (!made) co_return http::error_response(made.err(), ctx.request_id);
  co_return http::json_response(
      201, {{"name", made->name}, {"created_at", format_time(made->created_at)}, {"pid", pid_json(made->pid)}});
}

asio::awaitable<http::response> list_sessions(http::context&) {
  auto ex = co_await asio::this_coro::executor;
  json items = json::array();
  for (const auto& s : session_registry::of(ex).list()) {
    items.push_back({{"name", s.name},
                     {"created_at", format_time(s.created_at)},
                     {"pid", pid_json(s.pid)},
                     {"busy", s.busy},
                     {"waiting", s.waiting}});
  }
  co_return http::json_response(200, {{"items", items}, {"next_cursor", nullptr}});
}

asio::awaitable<http::response> delete_session(http::context& ctx) {
  auto ex = co_await asio::this_coro::executor;
  auto removed = session_registry::of(ex).remove(ctx.params["name"]);
  if (!removed) co_return http::error_response(removed.err(), ctx.request_id);
  co_return http::empty_response(204);
}

json outcome_json(const sessions::exec_outcome& o, bool binary) {
  json j = to_json(o.result, binary);
  j["session_restarted"] = o.session_restarted;
  return j;
}

asio::awaitable<http::response> exec_whole(http::context& ctx, const std::string& name) {
  auto call = parse_session_exec(ctx.req.body());
  if (!call) co_return http::error_response(call.err(), ctx.request_id);
  auto ex = co_await asio::this_coro::executor;
  session_registry& reg = session_registry::of(ex);
  auto done = co_await reg.exec(name, call->params);
  if (!done) co_return http::error_response(done.err(), ctx.request_id);
  co_return http::json_response(200, outcome_json(*done, call->binary));
}

asio::awaitable<http::response> exec_in_named(http::context& ctx) {
  std::string name = ctx.params["name"];
  co_return co_await exec_whole(ctx, name);
}

asio::awaitable<http::response> exec_in_default(http::context& ctx) {
  std::string name = sessions::default_session;
  co_return co_await exec_whole(ctx, name);
}

asio::awaitable<bool> exec_events(http::exchange& ex, const std::string& name) {
  const std::size_t limit = http::server_options{}.body_limit;
  auto body = co_await http::read_small_body(ex, limit);
  if (!body) {
    error e = body.err();
    co_return co_await http::respond_error(ex, e);
  }
  auto call = parse_session_exec(*body);
  if (!call) {
    error e = call.err();
    co_return co_await http::respond_error(ex, e);
  }
  session_registry& reg = session_registry::of(ex.stream.get_executor());
  if (!reg.has(name)) {
    error e = make_error(errc::not_found, "session " + name + " not found");
    co_return co_await http::respond_error(ex, e);
  }
  // The header goes out now: the call may wait behind others, and the command may be silent.
  sse_writer events(ex, call->binary);
  if (!co_await events.begin()) co_return false;
  call->params.sink = &events;
  auto done = co_await reg.exec(name, call->params);
  if (!done) {
    json failure = error_json(done.err());
    if (!co_await events.send("error", failure)) co_return false;
    co_return co_await events.finish();
  }
  if (done->result.abandoned || events.failed()) co_return false;
  json summary = {{"exit_code", done->result.exit_code},
                  {"timed_out", done->result.timed_out},
                  {"truncated", done->result.truncated},
                  {"duration_ms", done->result.duration.count()},
                  {"session_restarted", done->session_restarted}};
  if (!co_await events.send("exit", summary)) co_return false;
  co_return co_await events.finish();
}

asio::awaitable<bool> events_in_named(http::exchange& ex) {
  std::string name = ex.params["name"];
  co_return co_await exec_events(ex, name);
}

asio::awaitable<bool> events_in_default(http::exchange& ex) {
  std::string name = sessions::default_session;
  co_return co_await exec_events(ex, name);
}

}  // namespace

std::vector<http::route> session_routes() {
  return {
      {http::verb::post, "/sessions", &create_session},
      {http::verb::get, "/sessions", &list_sessions},
      {http::verb::delete_, "/sessions/{name}", &delete_session},
      {http::verb::post, "/sessions/{name}/exec", &exec_in_named},
      {http::verb::post, "/exec", &exec_in_default},
  };
}

std::vector<http::stream_route> session_stream_routes() {
  return {
      {http::verb::post, "/sessions/{name}/exec", &events_in_named, &http::wants_event_stream},
      {http::verb::post, "/exec", &events_in_default, &http::wants_event_stream},
  };
}

}  // namespace sandfort::agent
