// envd's process.Process over Connect (JSON, enveloped server streams), through the agent's
// background commands (the native /v1/sandboxes/{id}/commands routes' own): Start starts one and
// follows its output as it is produced, so a command outlives its stream as envd's do (background
// commands, disconnect); Connect follows one again; List, SendInput, CloseStdin and SendSignal
// reach it by its pid. A Start with `pty` and the calls naming a PTY's pid are pty.cpp's.
#include <atomic>
#include <chrono>

#include <boost/asio/as_tuple.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "sandfort/core/base64.hpp"
#include "wire.hpp"

namespace sandfort::compat::e2b {

namespace beast = boost::beast;

namespace {

// A Start request: the command and its options, one JSON message (Connect's limit for it).
constexpr std::size_t max_request_bytes = 1u << 20;
// One event of the agent's stream, as it is held until its end is seen.
constexpr std::size_t max_event_bytes = 4u << 20;

}  // namespace

// A Connect envelope: flags, the length big-endian, the JSON message.
std::string envelope(std::uint8_t flags, const json& message) {
  const std::string body = message.dump();
  const auto n = static_cast<std::uint32_t>(body.size());
  std::string out;
  out.reserve(5 + body.size());
  out.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  return out + body;
}

json connect_error_json(const error& e) {
  auto res = connect_error(e, "");
  return json::parse(res.body(), nullptr, false);
}

// The request's one enveloped message.
result<json> read_enveloped(const std::string& body) {
  if (body.size() < 5) return make_error(errc::invalid_argument, "a Connect stream request needs one envelope");
  if (body[0] != 0) return make_error(errc::invalid_argument, "compressed or end-stream envelopes are not taken");
  std::uint32_t n = 0;
  for (int i = 1; i <= 4; ++i) n = (n << 8) | static_cast<std::uint8_t>(body[static_cast<std::size_t>(i)]);
  if (n != body.size() - 5) return make_error(errc::invalid_argument, "the envelope's length is not its message's");
  auto j = json::parse(body.substr(5), nullptr, false);
  if (!j.is_object()) return make_error(errc::invalid_argument, "the message is not a JSON object");
  return j;
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The agent's start request for envd's ProcessConfig {cmd, args, envs, cwd}: the argv exec'd by
// the agent's shell, so the pid it reports is the command's own.
result<json> parse_start(const json& message) {
  const json process = message.value("process", json::object());
  if (!process.is_object() || !process.contains("cmd") || !process["cmd"].is_string() ||
      process["cmd"].get<std::string>().empty())
    return make_error(errc::invalid_argument, "process.cmd is required");
  std::string command = "exec " + shell_quote(process["cmd"].get<std::string>());
  if (auto args = process.find("args"); args != process.end()) {
    if (!args->is_array()) return make_error(errc::invalid_argument, "process.args must be a list of strings");
    for (const auto& arg : *args) {
      if (!arg.is_string()) return make_error(errc::invalid_argument, "process.args must be a list of strings");
      command += " " + shell_quote(arg.get<std::string>());
    }
  }
  json req = {{"command", command}};
  if (auto envs = process.find("envs"); envs != process.end() && envs->is_object() && !envs->empty()) {
    json env = json::object();
    for (const auto& [k, v] : envs->items())
      if (v.is_string()) env[k] = v;
    req["env"] = env;
  }
  if (auto cwd = process.find("cwd"); cwd != process.end() && cwd->is_string() && !cwd->get<std::string>().empty())
    req["cwd"] = *cwd;
  return req;
}

// The pid a ProcessSelector names ({process: {pid}}); tags are not kept.
result<std::int64_t> selected_pid(const json& message) {
  const json process = message.value("process", json::object());
  if (!process.is_object() || !process.contains("pid") || !process["pid"].is_number_integer())
    return make_error(errc::invalid_argument, "process.pid is required (tags are not kept)");
  return process["pid"].get<std::int64_t>();
}

// The enveloped message of a server-streaming call.
awaitable<result<json>> streaming_message(http::exchange& ex) {
  auto body = co_await http::read_small_body(ex, max_request_bytes);
  if (!body) co_return body.err();
  co_return read_enveloped(*body);
}

awaitable<std::optional<stream_request>> begin_stream(dependencies& deps, http::exchange& ex, api::stream_call& sc,
                                                      bool& keep) {
  auto call = authorize(deps, ex.parser.get());
  if (!call) {
    sc.answered(call.err());
    keep = co_await http::respond(ex, refuse_call(call.err(), ex.request_id));
    co_return std::nullopt;
  }
  if (call->port == interpreter_port) {
    keep = co_await http::respond(ex, interpreter_not_served());
    co_return std::nullopt;
  }
  auto message = co_await streaming_message(ex);
  if (!message) {
    keep = co_await http::respond(ex, stream_error(message.err(), ex.request_id));
    co_return std::nullopt;
  }
  stream_request begun;  // member by member: no braced initializers with JSON in a coroutine (GCC 12)
  begun.call = std::move(*call);
  begun.message = std::move(*message);
  co_return begun;
}

namespace {

// The agent's server-sent events (stdout, stderr, exit, error) as envd's process events. The
// frames are made apart from the coroutines (GCC 12 miscompiles braced JSON inside them).
class envelope_sink final : public event_translator {
 public:
  explicit envelope_sink(http::chunked_writer& out) : event_translator(out, max_event_bytes) {}

  std::optional<json> outcome;  // the exit event's summary, or an error event's error
  bool failed = false;

 private:
  // The envelope for one output event; empty for the others (noted in outcome).
  std::string translate(const event& e) override {
    const std::string& name = e.name;
    const std::string& data = e.data;
    auto j = json::parse(data, nullptr, false);
    if (j.is_discarded()) return {};
    if (name == "stdout" || name == "stderr") {
      std::string b64 = j.contains("data_b64") && j["data_b64"].is_string() ? j["data_b64"].get<std::string>()
                                                                          : base64_encode(j.value("data", std::string()));
      json chunk = json::object();
      chunk[name] = b64;
      return envelope(0, json{{"event", json{{"data", chunk}}}});
    }
    if (name == "exit") outcome = j;
    if (name == "error") {
      failed = true;
      outcome = j.value("error", json::object());
    }
    return {};
  }
};

std::string start_frame(std::int64_t pid) { return envelope(0, json{{"event", json{{"start", json{{"pid", pid}}}}}}); }

// The end event (empty when there is none to send) and the end-of-stream trailer.
std::pair<std::string, std::string> closing_frames(const result<void>& ran, const envelope_sink& sink) {
  json trailer = json::object();
  std::string end_frame;
  if (!ran) {
    trailer["error"] = connect_error_json(ran.err());
  } else if (sink.failed || !sink.outcome) {
    trailer["error"] = json{{"code", "internal"},
                            {"message", sink.outcome ? sink.outcome->value("message", std::string("the command failed"))
                                                     : std::string("the command's stream ended early")}};
  } else {
    const int code = sink.outcome->value("exit_code", -1);
    json end = {{"exitCode", code}, {"exited", true}, {"status", "exit status " + std::to_string(code)}};
    if (sink.outcome->value("timed_out", false)) end["error"] = "the command timed out";
    end_frame = envelope(0, json{{"event", json{{"end", end}}}});
  }
  return {end_frame, envelope(end_stream_flag, trailer)};
}

// The agent's running commands as envd's ProcessInfo list (their config is the shell line).
json process_list(const json& listed, const std::string& sandbox_id) {
  json processes = json::array();
  for (const auto& c : listed.value("items", json::array()))
    if (c.value("state", std::string()) == "running")
      processes.push_back(json{{"pid", c.value("pid", std::int64_t{0})},
                               {"config", json{{"cmd", "/bin/sh"},
                                               {"args", json::array({"-c", c.value("command", std::string())})}}}});
  list_ptys(sandbox_id, processes);
  return json{{"processes", processes}};
}

// The agent's command id of a running command with that pid.
awaitable<result<std::string>> command_of(dependencies& deps, const sandbox_call& call, std::int64_t pid,
                                          const audit::actor& who) {
  auto listed = co_await call_agent(deps, call, http::verb::get, "/commands", nullptr, who);
  if (!listed) co_return listed.err();
  if (listed->status == 200)
    for (const auto& c : listed->body.value("items", json::array()))
      if (c.value("pid", std::int64_t{-1}) == pid && c.value("state", std::string()) == "running")
        co_return c.value("id", std::string());
  co_return make_error(errc::not_found, "process with pid " + std::to_string(pid) + " not found");
}

// Follows a command's output (the agent's follow stream) into `sink` until it exits or the
// client goes. Its answer's header within 30 s; then as long as the command runs.
awaitable<result<void>> follow(dependencies& deps, const sandbox_call& call, const std::string& id,
                               envelope_sink& sink, const audit::actor& who) {
  auto agent = co_await deps.commands.connect_agent(call.org_id, call.sandbox_id, who, nullptr);
  if (!agent) co_return agent.err();
  http::request req{http::verb::get, "/commands/" + query_escape(id) + "/logs?follow=true", 11};
  req.set(http::bhttp::field::host, "agent");
  req.set(http::bhttp::field::accept, "text/event-stream");
  agent->stream.lowest().expires_after(std::chrono::seconds(30));
  auto [wec, wn] = co_await beast::http::async_write(agent->stream, req, asio::as_tuple(asio::use_awaitable));
  (void)wn;
  if (wec) co_return make_error(errc::unavailable, "the sandbox's agent did not take the request");
  beast::flat_buffer buffer = http::bounded_read_buffer();
  agent_body_parser parser;
  parser.body_limit(boost::none);
  auto [hec, hn] = co_await beast::http::async_read_header(agent->stream, buffer, parser,
                                                           asio::as_tuple(asio::use_awaitable));
  (void)hn;
  if (hec) co_return make_error(errc::unavailable, "the sandbox's agent did not answer");
  if (parser.get().result_int() != 200) co_return make_error(errc::not_found, "the command is gone");
  agent->stream.lowest().expires_never();  // output comes when the command makes it
  co_return co_await relay_body(agent->stream, buffer, parser, sink);  // ok too when the client left
}

// A stream's head written, its events followed, its end: what Start and Connect share.
awaitable<bool> stream_events(dependencies& deps, http::exchange& ex, const sandbox_call& call, const std::string& id,
                              std::int64_t pid) {
  http::chunked_writer out(ex);
  if (!co_await out.start(200, "application/connect+json")) co_return false;
  if (!co_await out.write(start_frame(pid))) co_return false;
  envelope_sink sink(out);
  auto ran = co_await follow(deps, call, id, sink, token_actor(call, ex.request_id, ex.remote));
  auto [end_frame, trailer] = closing_frames(ran, sink);
  if (!end_frame.empty() && !co_await out.write(end_frame)) co_return false;
  if (!co_await out.write(trailer)) co_return false;
  co_return co_await out.finish();
}

// POST /process.Process/Start: the command started in the background, then followed.
awaitable<bool> start_process(dependencies& deps, http::exchange& ex, api::stream_call& sc) {
  bool keep = false;
  auto begun = co_await begin_stream(deps, ex, sc, keep);
  if (!begun) co_return keep;
  const sandbox_call* call = &begun->call;
  const json* message = &begun->message;
  if (auto pty = message->find("pty"); pty != message->end() && !pty->is_null())
    co_return co_await start_pty(deps, ex, sc, *call, *message);  // pty.cpp
  auto req = parse_start(*message);
  if (!req) co_return co_await http::respond(ex, stream_error(req.err(), ex.request_id));
  const auto who = token_actor(*call, ex.request_id, ex.remote);
  auto started = co_await call_agent(deps, *call, http::verb::post, "/commands", &*req, who);
  if (!started) co_return co_await http::respond(ex, stream_error(started.err(), ex.request_id));
  if (started->status != 201) co_return co_await http::respond(ex, stream_error(make_error(errc::invalid_argument,
      started->body.is_object() ? started->body.value("error", json::object()).value("message", std::string("refused"))
                                : std::string("refused")), ex.request_id));
  sc.answered(200u);
  co_return co_await stream_events(deps, ex, *call, started->body.value("id", std::string()),
                                   started->body.value("pid", std::int64_t{0}));
}

// POST /process.Process/Connect: a running command's output followed again.
awaitable<bool> connect_process(dependencies& deps, http::exchange& ex, api::stream_call& sc) {
  bool keep = false;
  auto begun = co_await begin_stream(deps, ex, sc, keep);
  if (!begun) co_return keep;
  const sandbox_call* call = &begun->call;
  const json* message = &begun->message;
  auto pid = selected_pid(*message);
  if (!pid) co_return co_await http::respond(ex, stream_error(pid.err(), ex.request_id));
  if (is_pty(call->sandbox_id, *pid)) co_return co_await connect_pty(ex, sc, *call, *pid);  // pty.cpp
  auto id = co_await command_of(deps, *call, *pid, token_actor(*call, ex.request_id, ex.remote));
  if (!id) co_return co_await http::respond(ex, stream_error(id.err(), ex.request_id));
  sc.answered(200u);
  co_return co_await stream_events(deps, ex, *call, *id, *pid);
}

// envd's Signal enum name as the agent's.
std::string signal_name(const json& message) {
  const std::string s = message.value("signal", std::string("SIGNAL_SIGKILL"));
  return s == "SIGNAL_SIGTERM" || s == "15" ? "TERM" : "KILL";
}

// The unary ones: List, SendSignal, SendInput, CloseStdin.
awaitable<http::response> process_rpc(dependencies& deps, http::context& ctx, const auth::principal&) {
  auto call = authorize(deps, ctx.req);
  if (!call) co_return refuse_call(call.err(), ctx.request_id);
  if (call->port == interpreter_port) co_return interpreter_not_served();
  auto bad = [&](const error& e) { return connect_error(e, ctx.request_id); };
  const auto message = json::parse(ctx.req.body().empty() ? std::string("{}") : ctx.req.body(), nullptr, false);
  if (!message.is_object()) co_return bad(make_error(errc::invalid_argument, "the message is not a JSON object"));
  const auto who = token_actor(*call, ctx.request_id, ctx.remote);
  const std::string method = ctx.params["method"];
  if (method == "List") {
    auto listed = co_await call_agent(deps, *call, http::verb::get, "/commands", nullptr, who);
    if (!listed) co_return bad(listed.err());
    co_return http::json_response(200, process_list(listed->body, call->sandbox_id));
  }
  if (auto answered = pty_rpc(*call, method, message, ctx.request_id)) co_return std::move(*answered);  // pty.cpp
  if (method != "SendSignal" && method != "SendInput" && method != "CloseStdin")
    co_return http::json_response(501, json{{"code", "unimplemented"},
                                            {"message", "process.Process/" + method +
                                                            " is not served by Sandfort's E2B-compatible API yet"}});
  auto pid = selected_pid(message);
  if (!pid) co_return bad(pid.err());
  auto id = co_await command_of(deps, *call, *pid, who);
  if (!id) co_return bad(id.err());
  result<agent_answer> done = make_error(errc::internal, "");
  if (method == "SendSignal") {
    const json body = json{{"signal", signal_name(message)}};
    done = co_await call_agent(deps, *call, http::verb::post, "/commands/" + query_escape(*id) + "/kill", &body, who);
  } else {
    std::string bytes;
    if (method == "SendInput") {
      const json input = message.value("input", json::object());
      auto decoded = base64_decode(input.is_object() ? input.value("stdin", std::string()) : std::string());
      if (!decoded) co_return bad(make_error(errc::invalid_argument, "input.stdin must be base64"));
      bytes = std::move(*decoded);
    }
    const std::string_view raw(bytes);
    done = co_await call_agent(deps, *call, http::verb::post,
                               "/commands/" + query_escape(*id) + "/stdin" + (method == "CloseStdin" ? "?eof=true" : ""),
                               nullptr, who, &raw);
  }
  if (!done) co_return bad(done.err());
  if (done->status >= 300)
    co_return bad(make_error(errc::invalid_argument, done->body.is_object()
                                 ? done->body.value("error", json::object()).value("message", std::string("refused"))
                                 : std::string("refused")));
  co_return http::json_response(200, json::object());
}

}  // namespace

std::vector<api::api_route> process_routes() {
  // No API key: each handler authorizes the sandbox's access token first.
  api::api_route start{http::verb::post, "/e2b-sandbox/process.Process/Start", std::nullopt, api::route_kind::streamed,
                       start_process};
  api::api_route connect{http::verb::post, "/e2b-sandbox/process.Process/Connect", std::nullopt,
                         api::route_kind::streamed, connect_process};
  api::api_route unary{http::verb::post, "/e2b-sandbox/process.Process/{method}", std::nullopt, process_rpc};
  std::vector<api::api_route> all;
  for (auto* r : {&start, &connect, &unary}) {
    r->dialect = sandbox_dialect();
    all.push_back(std::move(*r));
  }
  return all;
}

}  // namespace sandfort::compat::e2b
