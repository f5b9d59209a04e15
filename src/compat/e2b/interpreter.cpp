// E2B's code interpreter behind the sandbox plane's port-49999 door (what @e2b/code-interpreter
// sends with E2b-Sandbox-Port: 49999), translated onto the agent's code contexts, the same ones the
// native /v1/sandboxes/{id}/code/run and /code/contexts routes forward to (docs/e2b.md, "Code
// interpreter"):
//   POST /execute {code, context_id?, language?, env_vars?}  -> the agent's POST /code/run, its
//        server-sent events (stdout, stderr, result, error, end, failure) written as the
//        newline-delimited JSON the SDK reads ({"type": "stdout", "text"}, … ,
//        {"type": "number_of_executions", "execution_count"})
//   POST /contexts {language, cwd}, GET /contexts, DELETE /contexts/{id},
//   POST /contexts/{id}/restart                               -> the agent's /code/contexts routes
// The SDK sends the sandbox's access token as X-Access-Token on /execute only; on /contexts it
// sends just E2B-Traffic-Access-Token, which the create and connect answers set to the same token
// (authorize() takes it on this door).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "sandfort/http/proxy.hpp"
#include "wire.hpp"

namespace sandfort::compat::e2b {

namespace beast = boost::beast;

namespace {

// One event of a run as it is held until its end is seen: a result carries a figure's PNG, and a
// run's output and results are capped by the agent at 10 MiB (its --output-cap).
constexpr std::size_t max_run_event_bytes = 16u << 20;
// An agent's refusal of a run (a JSON error) as it is read.
constexpr std::size_t max_refusal_bytes = 64u << 10;

// A string field of the agent's JSON (untrusted: a missing field, another type or a body that is
// not an object is `fallback`).
std::string text_field(const json& j, const char* key, const std::string& fallback = {}) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// The door's own errors: E2B's REST shape; a deleted sandbox is the SDK's "not running" (502).
http::response door_error(const error& e, const std::string& request_id) {
  return is_gone(e) ? not_running(e.message) : rest_error(e, request_id);
}

// An agent's answer that is not a success, as the door answers it: its 4xx kept (404 is the
// SDK's NotFoundError), anything else 500; its message, bounded.
http::response interpreter_refusal(unsigned status, const json& body, const std::string& request_id) {
  std::string message = "refused by the sandbox's agent";
  if (body.is_object() && body.contains("error"))
    message = text_field(body["error"], "message", message).substr(0, 1024);
  const unsigned kept = status >= 400 && status < 500 ? status : 500;
  auto res = http::json_response(kept, {{"code", kept}, {"message", message}});
  res.set("X-Request-Id", request_id);
  return res;
}

// The door's calls are for port 49999; envd's port has no /execute or /contexts.
result<sandbox_call> open_door(dependencies& deps, const http::bhttp::fields& h) {
  auto call = authorize(deps, h);
  if (!call) return call;
  if (call->port != interpreter_port)
    return make_error(errc::not_found, "port " + call->port + " of this sandbox serves no code interpreter");
  return call;
}

// A field of E2B's that the agent names otherwise, copied when set.
void copy_field(const json& from, const char* name, json& to, const char* as) {
  if (auto it = from.find(name); it != from.end() && !it->is_null()) to[as] = *it;
}

// E2B's execute request as the agent's run request.
result<json> run_request(const std::string& text) {
  const auto body = json::parse(text, nullptr, false);
  if (!body.is_object()) return make_error(errc::invalid_argument, "the body must be a JSON object");
  json req = json::object();
  copy_field(body, "code", req, "code");
  copy_field(body, "context_id", req, "context_id");
  copy_field(body, "language", req, "language");
  copy_field(body, "env_vars", req, "env");
  return req;
}

// A context as E2B's Context {id, language, cwd}.
json context_of(const json& native) {
  return json{{"id", text_field(native, "id")},
              {"language", text_field(native, "language")},
              {"cwd", text_field(native, "cwd")}};
}

// The agent's run events (server-sent) as E2B's lines. The lines are made apart from the
// coroutines (GCC 12 miscompiles braced JSON inside them).
class ndjson_sink final : public event_translator {
 public:
  explicit ndjson_sink(http::chunked_writer& out) : event_translator(out, max_run_event_bytes) {}

  bool ended = false;  // the run's end (or its failure) was seen

 private:
  static std::string line_of(json j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

  // The line for one event; empty for those E2B has no line for (keep-alive comments).
  std::string translate(const event& e) override {
    const std::string& name = e.name;
    auto j = json::parse(e.data, nullptr, false);
    if (name.empty() || !j.is_object()) return {};
    if (name == "stdout" || name == "stderr") return line_of(json{{"type", name}, {"text", text_field(j, "text")}});
    if (name == "result" || name == "error") {
      j["type"] = name;
      return line_of(std::move(j));
    }
    if (name == "end") {
      ended = true;
      auto count = j.find("execution_count");
      const std::int64_t n = count != j.end() && count->is_number_integer() ? count->get<std::int64_t>() : 0;
      return line_of(json{{"type", "number_of_executions"}, {"execution_count", n}});
    }
    if (name == "failure") {  // the run broke after its events began (its context removed, …)
      ended = true;
      const json failure = j.contains("error") ? j["error"] : json::object();
      return line_of(json{{"type", "error"},
                          {"name", text_field(failure, "code", "internal")},
                          {"value", text_field(failure, "message")},
                          {"traceback", ""}});
    }
    return {};
  }
};

std::string error_line(const std::string& name, const std::string& value) {
  return json{{"type", "error"}, {"name", name}, {"value", value}, {"traceback", ""}}.dump(
             -1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

// The agent answers a run's head with its first event, or at once with an error (bad code,
// language or context). A run accepted but silent (queued behind another, or code that prints
// nothing for minutes) must not look to the SDK like a request that never answered: when the
// agent's head has not come within the grace period, the client's head is written then, and
// a late refusal becomes an error line.
constexpr std::chrono::seconds run_head_grace{5};

struct run_head {
  explicit run_head(const asio::any_io_executor& e) : grace(e, run_head_grace) {}
  asio::steady_timer grace;
  beast::error_code ec;
  bool done = false;     // the agent's head is read (or failed)
  bool started = false;  // the client's head is written
  bool client_ok = true;
};

awaitable<void> read_run_head(sandbox::agent_stream& stream, beast::flat_buffer& buffer, agent_body_parser& parser,
                              run_head& head) {
  auto [ec, n] = co_await beast::http::async_read_header(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
  (void)n;
  head.ec = ec;
  head.done = true;
  head.grace.cancel();
}

awaitable<void> start_after_grace(http::chunked_writer& writer, run_head& head) {
  auto [ec] = co_await head.grace.async_wait(asio::as_tuple(asio::use_awaitable));
  if (ec || head.done) co_return;
  head.started = true;
  head.client_ok = co_await writer.start(200, "application/x-ndjson");
}

// The agent's refusal of a run: its small JSON body, read up to max_refusal_bytes.
class refusal_sink final : public sandbox::byte_sink {
 public:
  awaitable<bool> write(std::string_view bytes) override {
    text.append(bytes);
    co_return text.size() <= max_refusal_bytes;
  }
  std::string text;
};

awaitable<json> read_refusal(sandbox::agent_stream& stream, beast::flat_buffer& buffer, agent_body_parser& parser) {
  refusal_sink refusal;
  stream.lowest().expires_after(std::chrono::seconds(30));
  (void)co_await relay_body(stream, buffer, parser, refusal);
  co_return json::parse(refusal.text, nullptr, false);
}

// The run's request to the agent, and its answer translated: a refusal as the door's status (or
// an error line once the client's head is written), the events as E2B's lines.
awaitable<bool> answer_run(dependencies& deps, http::exchange& ex, api::stream_call& sc, sandbox::agent_stream& agent,
                           const json& req) {
  http::request out = http::make_request(http::verb::post, "/code/run", &req);
  out.set(http::bhttp::field::host, "agent");
  out.set(http::bhttp::field::accept, "text/event-stream");
  out.prepare_payload();
  // The run's events start once the runs queued before it in its context are done (as native).
  agent.lowest().expires_after(std::chrono::seconds(deps.cfg.exec_max_timeout_s + 60));
  auto [wec, wn] = co_await beast::http::async_write(agent, out, asio::as_tuple(asio::use_awaitable));
  (void)wn;
  beast::flat_buffer buffer = http::bounded_read_buffer();
  agent_body_parser parser;
  parser.body_limit(boost::none);
  http::chunked_writer writer(ex);
  run_head head(ex.stream.get_executor());
  if (wec) {
    head.ec = wec;
  } else {
    using namespace asio::experimental::awaitable_operators;
    co_await (read_run_head(agent, buffer, parser, head) && start_after_grace(writer, head));
  }
  if (head.started && !head.client_ok) co_return false;
  const unsigned status = head.ec ? 0u : parser.get().result_int();
  if (status != 200) {  // refused (or unanswered) before any event
    json refusal = json::object();
    if (status) refusal = co_await read_refusal(agent, buffer, parser);
    auto res = status ? interpreter_refusal(status, refusal, ex.request_id)
                      : door_error(make_error(errc::unavailable, "the sandbox's agent did not answer the run"),
                                   ex.request_id);
    if (!head.started) {
      sc.answered(res.result_int());
      co_return co_await http::respond(ex, std::move(res));
    }
    sc.answered(200u);
    const auto said = json::parse(res.body(), nullptr, false);
    if (!co_await writer.write(error_line("SandboxError", text_field(said, "message", "refused"))))
      co_return false;
    co_return co_await writer.finish();
  }
  sc.answered(200u);
  if (!head.started && !co_await writer.start(200, "application/x-ndjson")) co_return false;
  ndjson_sink sink(writer);
  agent.lowest().expires_never();  // events come when the code makes them; the run has its timeout
  (void)co_await relay_body(agent, buffer, parser, sink);
  // A stream that broke or ended before the run's end.
  if (!sink.ended && !co_await writer.write(error_line("SandboxError", "the sandbox's agent ended the run early")))
    co_return false;
  co_return co_await writer.finish();
}

// POST /execute: the run in the agent, its events translated as they come.
awaitable<bool> execute_code(dependencies& deps, http::exchange& ex, api::stream_call& sc) {
  auto call = open_door(deps, ex.parser.get());
  if (!call) {
    sc.answered(call.err());
    co_return co_await http::respond(ex, door_error(call.err(), ex.request_id));
  }
  auto body = co_await http::read_small_body(ex, deps.cfg.max_body_bytes);
  if (!body) {
    sc.answered(body.err());
    co_return co_await http::respond(ex, door_error(body.err(), ex.request_id));
  }
  auto req = run_request(*body);
  if (!req) {
    sc.answered(req.err());
    co_return co_await http::respond(ex, door_error(req.err(), ex.request_id));
  }
  // Recorded in the audit chain before it happens, as the native run is.
  const audit::record note{api::forwarded_action(http::verb::post, "/code/run"), "", "accepted",
                           json{{"method", "POST"}, {"path", "/code/run"}, {"via", "e2b"}}};
  const auto who = token_actor(*call, ex.request_id, ex.remote);
  auto agent = co_await deps.commands.connect_agent(call->org_id, call->sandbox_id, who, &note);
  if (!agent) {
    sc.answered(agent.err());
    co_return co_await http::respond(ex, door_error(agent.err(), ex.request_id));
  }
  // A client that leaves (the SDK's timeoutMs, a process that ends) drops the agent connection at
  // once, as the native relay does: the agent then interrupts the run or drops it from the queue.
  using namespace asio::experimental::awaitable_operators;
  auto which = co_await (answer_run(deps, ex, sc, agent->stream, *req) || http::until_client_leaves(ex));
  if (which.index() == 1) co_return false;
  co_return std::get<0>(which);
}

// The /contexts calls: one agent call each, its answer in E2B's shape.
awaitable<http::response> context_call(dependencies& deps, http::context& ctx, const auth::principal&) {
  auto call = open_door(deps, ctx.req);
  if (!call) co_return door_error(call.err(), ctx.request_id);
  const auto who = token_actor(*call, ctx.request_id, ctx.remote);
  const auto method = ctx.req.method();
  const std::string id = ctx.params["ctx"];
  const std::string one = "/code/contexts/" + query_escape(id);
  result<agent_answer> a = make_error(errc::internal, "");
  unsigned ok = 200;
  if (method == http::verb::post && id.empty()) {  // create
    const auto body = json::parse(ctx.req.body().empty() ? std::string("{}") : ctx.req.body(), nullptr, false);
    if (!body.is_object())
      co_return door_error(make_error(errc::invalid_argument, "the body must be a JSON object"), ctx.request_id);
    json req = json::object();
    copy_field(body, "language", req, "language");
    copy_field(body, "cwd", req, "cwd");
    a = co_await call_agent(deps, *call, method, "/code/contexts", &req, who);
    ok = 201;
  } else if (method == http::verb::get) {
    a = co_await call_agent(deps, *call, method, "/code/contexts", nullptr, who);
  } else if (method == http::verb::delete_) {
    a = co_await call_agent(deps, *call, method, one, nullptr, who);
    ok = 204;
  } else {  // restart
    a = co_await call_agent(deps, *call, http::verb::post, one + "/restart", nullptr, who);
  }
  if (!a) co_return door_error(a.err(), ctx.request_id);
  if (a->status != ok) co_return interpreter_refusal(a->status, a->body, ctx.request_id);
  if (method == http::verb::delete_) co_return http::empty_response(204);
  if (method == http::verb::get) {
    json listed = json::array();
    if (a->body.is_object() && a->body.contains("items") && a->body["items"].is_array())
      for (const auto& c : a->body["items"]) listed.push_back(context_of(c));
    co_return http::json_response(200, listed);
  }
  co_return http::json_response(200, context_of(a->body));
}

}  // namespace

std::vector<api::api_route> interpreter_routes() {
  // No API key: each handler authorizes the sandbox's access token first (open_door()).
  using http::verb;
  api::api_route run{verb::post, "/e2b-sandbox/execute", std::nullopt, api::route_kind::streamed, execute_code};
  api::api_route create{verb::post, "/e2b-sandbox/contexts", std::nullopt, context_call};
  api::api_route list{verb::get, "/e2b-sandbox/contexts", std::nullopt, context_call};
  api::api_route remove{verb::delete_, "/e2b-sandbox/contexts/{ctx}", std::nullopt, context_call};
  api::api_route restart{verb::post, "/e2b-sandbox/contexts/{ctx}/restart", std::nullopt, context_call};
  std::vector<api::api_route> all;
  for (auto* r : {&run, &create, &list, &remove, &restart}) {
    r->dialect = sandbox_dialect();
    all.push_back(std::move(*r));
  }
  return all;
}

}  // namespace sandfort::compat::e2b
