#include "commands/routes.hpp"

#include <boost/asio/this_coro.hpp>
#include <signal.h>

#include <array>
#include <cctype>
#include <utility>

#include "commands/commands.hpp"
#include "process/exec_json.hpp"
#include "process/sse.hpp"

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;
using nlohmann::json;
using command_registry = commands::registry;


json info_json(const commands::command_info& c) {
  json j = {{"id", c.id},
            {"pid", c.pid},
            {"state", c.running ? "running" : "exited"},
            {"command", c.command},
            {"started_at", format_time(c.started_at)}};
  if (c.exit_code) j["exit_code"] = *c.exit_code;
  if (c.ended_at) j["ended_at"] = format_time(*c.ended_at);
  return j;
}

result<commands::start_request> parse_start(std::string_view body) {
  auto j = parse_object(body);
  if (!j) return std::move(j).err();
  if (auto known = check_fields(*j, {"command", "cwd", "env"}); !known) return std::move(known).err();
  commands::start_request req;
  if (!j->contains("command") || !(*j)["command"].is_string()) return invalid_argument("command must be a string");
  req.command = (*j)["command"].get<std::string>();
  if (req.command.empty()) return invalid_argument("command must not be empty");
  if (j->contains("cwd")) {
    if (!(*j)["cwd"].is_string()) return invalid_argument("cwd must be a string");
    req.cwd = (*j)["cwd"].get<std::string>();
  }
  if (j->contains("env")) {
    auto env = parse_env((*j)["env"]);
    if (!env) return std::move(env).err();
    req.env = std::move(*env);
  }
  return req;
}

// "TERM", "SIGTERM", "term" or a number 1-64; TERM when absent.
result<int> parse_signal(std::string_view body) {
  auto j = parse_object(body);
  if (!j) return std::move(j).err();
  if (auto known = check_fields(*j, {"signal"}); !known) return std::move(known).err();
  if (!j->contains("signal")) return SIGTERM;
  const json& v = (*j)["signal"];
  if (v.is_number_integer()) {
    auto n = v.get<std::int64_t>();
    if (n < 1 || n > 64) return invalid_argument("signal must be between 1 and 64");
    return static_cast<int>(n);
  }
  if (!v.is_string()) return invalid_argument("signal must be a name like \"TERM\" or a number");
  std::string name = v.get<std::string>();
  for (auto& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  static const std::array<std::pair<const char*, int>, 7> known = {
      {{"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT},
       {"USR1", SIGUSR1}, {"USR2", SIGUSR2}}};
  for (const auto& [n, signo] : known)
    if (name == n) return signo;
  return invalid_argument("unknown signal '" + v.get<std::string>() + "' (TERM, KILL, INT, HUP, QUIT, USR1, USR2 or a number)");
}

bool flag(const std::map<std::string, std::string>& query, const std::string& name) {
  auto it = query.find(name);
  return it != query.end() && (it->second == "true" || it->second == "1");
}

asio::awaitable<http::response> start_command(http::context& ctx) {
  auto req = parse_start(ctx.req.body());
  if (!req) co_return http::error_response(req.err(), ctx.request_id);
  auto ex = co_await asio::this_coro::executor;
  auto started = command_registry::of(ex).start(ex, *req);
  if (!started) co_return http::error_response(started.err(), ctx.request_id);
  co_return http::json_response(201, info_json(*started));
}

asio::awaitable<http::response> list_commands(http::context&) {
  auto ex = co_await asio::this_coro::executor;
  json items = json::array();
  for (const auto& c : command_registry::of(ex).list()) items.push_back(info_json(c));
  co_return http::json_response(200, {{"items", items}, {"next_cursor", nullptr}});
}

asio::awaitable<http::response> get_command(http::context& ctx) {
  auto ex = co_await asio::this_coro::executor;
  auto found = command_registry::of(ex).get(ctx.params["cmd"]);
  if (!found) co_return http::error_response(found.err(), ctx.request_id);
  co_return http::json_response(200, info_json(*found));
}

asio::awaitable<http::response> command_logs(http::context& ctx) {
  auto ex = co_await asio::this_coro::executor;
  auto logs = command_registry::of(ex).logs(ctx.params["cmd"]);
  if (!logs) co_return http::error_response(logs.err(), ctx.request_id);
  json j = {{"stdout", logs->stdout_text}, {"stderr", logs->stderr_text}, {"dropped_bytes", logs->dropped_bytes}};
  http::response res{http::bhttp::status::ok, 11};
  res.set(http::bhttp::field::content_type, "application/json");
  res.body() = dump_json(j);  // output is raw bytes: invalid UTF-8 is replaced
  co_return res;
}

asio::awaitable<http::response> command_stdin(http::context& ctx) {
  auto ex = co_await asio::this_coro::executor;
  command_registry& reg = command_registry::of(ex);
  const std::string& id = ctx.params["cmd"];
  bool eof = flag(ctx.query, "eof");
  const std::string& bytes = ctx.req.body();
  auto written = co_await reg.write_stdin(id, bytes, eof);
  if (!written) co_return http::error_response(written.err(), ctx.request_id);
  co_return http::empty_response(204);
}

asio::awaitable<http::response> kill_command(http::context& ctx) {
  auto signo = parse_signal(ctx.req.body());
  if (!signo) co_return http::error_response(signo.err(), ctx.request_id);
  auto ex = co_await asio::this_coro::executor;
  auto sent = command_registry::of(ex).signal(ctx.params["cmd"], *signo);
  if (!sent) co_return http::error_response(sent.err(), ctx.request_id);
  co_return http::empty_response(204);
}

asio::awaitable<bool> follow_logs(http::exchange& ex) {
  command_registry& reg = command_registry::of(ex.stream.get_executor());
  const std::string& id = ex.params["cmd"];
  if (auto known = reg.get(id); !known) {
    error e = known.err();
    co_return co_await http::respond_error(ex, e);
  }
  sse_writer events(ex);
  if (!co_await events.begin()) co_return false;
  auto ended = co_await reg.follow(id, events);
  if (!ended) {
    json failure = error_json(ended.err());
    if (!co_await events.send("error", failure)) co_return false;
    co_return co_await events.finish();
  }
  if (!*ended || events.failed()) co_return false;
  json summary = {{"exit_code", **ended}};
  if (!co_await events.send("exit", summary)) co_return false;
  co_return co_await events.finish();
}

bool wants_follow(const http::bhttp::request_header<>& header) { return query_flag(header, "follow"); }

}  // namespace

std::vector<http::route> command_routes() {
  return {
      {http::verb::post, "/commands", &start_command},
      {http::verb::get, "/commands", &list_commands},
      {http::verb::get, "/commands/{cmd}", &get_command},
      {http::verb::get, "/commands/{cmd}/logs", &command_logs},
      {http::verb::post, "/commands/{cmd}/stdin", &command_stdin},
      {http::verb::post, "/commands/{cmd}/kill", &kill_command},
  };
}

std::vector<http::stream_route> command_stream_routes() {
  return {{http::verb::get, "/commands/{cmd}/logs", &follow_logs, &wants_follow}};
}

}  // namespace sandfort::agent
