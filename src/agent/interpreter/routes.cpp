#include "interpreter/routes.hpp"

#include <boost/asio/this_coro.hpp>
#include <cmath>

#include "interpreter/contexts.hpp"
#include "process/exec_json.hpp"
#include "process/sse.hpp"
#include "sandfort/http/server.hpp"

namespace sandfort::agent::interpreter {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

json context_json(const context_info& c) {
  return {{"id", c.id},
          {"language", std::string(to_string(c.lang))},
          {"cwd", c.cwd},
          {"default", c.is_default},
          {"created_at", format_time(c.created_at)},
          {"pid", c.pid ? json(*c.pid) : json(nullptr)},
          {"busy", c.busy},
          {"execution_count", c.execution_count}};
}

result<std::map<std::string, std::string>> parse_env(const json& j) {
  std::map<std::string, std::string> env;
  if (!j.contains("env") || j["env"].is_null()) return env;
  if (!j["env"].is_object()) return invalid_argument("env must be an object of strings");
  for (const auto& [key, value] : j["env"].items()) {
    if (!value.is_string()) return invalid_argument("env." + key + " must be a string");
    env[key] = value.get<std::string>();
  }
  return env;
}

result<std::string> optional_string(const json& j, const char* field) {
  if (!j.contains(field) || j[field].is_null()) return std::string();
  if (!j[field].is_string()) return invalid_argument(std::string(field) + " must be a string");
  return j[field].get<std::string>();
}

// `language` and `env`, the fields a context's create and a run share.
result<void> parse_shared(const json& j, std::optional<language>& lang, std::map<std::string, std::string>& env) {
  auto name = optional_string(j, "language");
  if (!name) return std::move(name).err();
  if (!name->empty()) {
    auto parsed = parse_language(*name);
    if (!parsed) return std::move(parsed).err();
    lang = *parsed;
  }
  auto parsed_env = parse_env(j);
  if (!parsed_env) return std::move(parsed_env).err();
  env = std::move(*parsed_env);
  return {};
}

result<create_params> parse_create(std::string_view body) {
  auto j = parse_object(body.empty() ? std::string_view("{}") : body);
  if (!j) return std::move(j).err();
  if (auto known = check_fields(*j, {"language", "cwd", "env"}); !known) return std::move(known).err();
  create_params p;
  std::optional<language> lang;
  if (auto shared = parse_shared(*j, lang, p.env); !shared) return std::move(shared).err();
  p.lang = lang.value_or(language::python);
  auto cwd = optional_string(*j, "cwd");
  if (!cwd) return std::move(cwd).err();
  p.cwd = *cwd;
  return p;
}

result<std::chrono::milliseconds> parse_timeout(const json& j) {
  const auto max = current_limits().max_timeout;
  const auto max_s = std::chrono::duration_cast<std::chrono::seconds>(max).count();
  if (!j.contains("timeout_s") || j["timeout_s"].is_null()) return std::chrono::milliseconds(0);
  const json& v = j["timeout_s"];
  if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() * 1000 > static_cast<double>(max.count()))
    return invalid_argument("timeout_s must be a positive number no greater than " + std::to_string(max_s));
  return std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(v.get<double>() * 1000)));
}

result<run_params> parse_run(std::string_view body) {
  auto j = parse_object(body);
  if (!j) return std::move(j).err();
  if (auto known = check_fields(*j, {"code", "language", "context_id", "env", "timeout_s"}); !known)
    return std::move(known).err();
  run_params p;
  if (!j->contains("code") || !(*j)["code"].is_string()) return invalid_argument("code must be a string");
  p.code = (*j)["code"].get<std::string>();
  if (auto shared = parse_shared(*j, p.lang, p.env); !shared) return std::move(shared).err();
  auto ctx = optional_string(*j, "context_id");
  if (!ctx) return std::move(ctx).err();
  p.context_id = *ctx;
  auto timeout = parse_timeout(*j);
  if (!timeout) return std::move(timeout).err();
  p.timeout = *timeout;
  return p;
}

asio::awaitable<http::response> create_context(http::context& ctx) {
  auto p = parse_create(ctx.req.body());
  if (!p) co_return http::error_response(p.err(), ctx.request_id);
  auto ex = co_await asio::this_coro::executor;
  auto made = co_await registry::of(ex).create(*p);
  if (!made) co_return http::error_response(made.err(), ctx.request_id);
  co_return http::json_response(201, context_json(*made));
}

asio::awaitable<http::response> list_contexts(http::context&) {
  auto ex = co_await asio::this_coro::executor;
  json items = json::array();
  for (const auto& c : registry::of(ex).list()) items.push_back(context_json(c));
  co_return http::json_response(200, {{"items", items}, {"next_cursor", nullptr}});
}

asio::awaitable<http::response> get_context(http::context& ctx) {
  auto ex = co_await asio::this_coro::executor;
  auto found = registry::of(ex).get(ctx.params["ctx"]);
  if (!found) co_return http::error_response(found.err(), ctx.request_id);
  co_return http::json_response(200, context_json(*found));
}

asio::awaitable<http::response> delete_context(http::context& ctx) {
  auto ex = co_await asio::this_coro::executor;
  auto removed = registry::of(ex).remove(ctx.params["ctx"]);
  if (!removed) co_return http::error_response(removed.err(), ctx.request_id);
  co_return http::empty_response(204);
}

asio::awaitable<http::response> restart_context(http::context& ctx) {
  auto ex = co_await asio::this_coro::executor;
  auto fresh = co_await registry::of(ex).restart(ctx.params["ctx"]);
  if (!fresh) co_return http::error_response(fresh.err(), ctx.request_id);
  co_return http::json_response(200, context_json(*fresh));
}

// A run's events as server-sent events: stdout/stderr {"text"}, result, error.
class event_stream final : public run_sink {
 public:
  explicit event_stream(http::exchange& ex) : events_(ex) {}
  asio::awaitable<bool> output(output_stream which, std::string_view text) override {
    json chunk = {{"text", std::string(text)}};
    std::string_view name = to_string(which);
    co_return co_await events_.send(name, chunk);
  }
  asio::awaitable<bool> event(std::string_view name, const json& data) override {
    co_return co_await events_.send(name, data);
  }
  asio::awaitable<void> wait_gone() override { co_await events_.wait_gone(); }
  sse_writer& writer() { return events_; }

 private:
  sse_writer events_;
};

constexpr std::string_view failure_event = "failure";
constexpr std::string_view end_event = "end";

asio::awaitable<bool> run_code(http::exchange& ex) {
  const std::size_t limit = http::server_options{}.body_limit;
  auto body = co_await http::read_small_body(ex, limit);
  if (!body) {
    error e = body.err();
    co_return co_await http::respond_error(ex, e);
  }
  auto params = parse_run(*body);
  if (!params) {
    error e = params.err();
    co_return co_await http::respond_error(ex, e);
  }
  event_stream events(ex);
  if (events.writer().gone_now()) co_return false;
  auto done = co_await registry::of(ex.stream.get_executor()).run(*params, events);
  if (!done) {
    error e = done.err();
    if (!events.writer().started()) co_return co_await http::respond_error(ex, e);
    json failure = error_json(e);
    if (!co_await events.writer().send(failure_event, failure)) co_return false;
    co_return co_await events.writer().finish();
  }
  if (done->abandoned || events.writer().failed()) co_return false;
  json end = {{"context_id", done->context_id},
              {"execution_count", done->execution_count},
              {"timed_out", done->timed_out},
              {"truncated", done->truncated},
              {"restarted", done->restarted},
              {"duration_ms", done->duration.count()}};
  if (!co_await events.writer().send(end_event, end)) co_return false;
  co_return co_await events.writer().finish();
}

bool always(const http::bhttp::request_header<>&) { return true; }

}  // namespace

std::vector<http::route> routes() {
  return {
      {http::verb::post, "/code/contexts", &create_context},
      {http::verb::get, "/code/contexts", &list_contexts},
      {http::verb::get, "/code/contexts/{ctx}", &get_context},
      {http::verb::delete_, "/code/contexts/{ctx}", &delete_context},
      {http::verb::post, "/code/contexts/{ctx}/restart", &restart_context},
  };
}

std::vector<http::stream_route> stream_routes() {
  return {{http::verb::post, "/code/run", &run_code, &always}};
}

}  // namespace sandfort::agent::interpreter
