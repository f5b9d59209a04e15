// Routes that stream: exec and code-run as server-sent events, and everything the agent
// serves itself (sessions, background commands, files, the PTY), forwarded to the
// sandbox's agent with bodies in pieces and WebSockets spliced.
#include <chrono>
#include <memory>
#include <optional>

#include "routes.hpp"
#include "sandbox_bodies.hpp"
#include "sandfort/http/proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

namespace sandfort::api {

namespace asio = boost::asio;

asio::awaitable<bool> forward_over(dependencies& deps, sandbox::agent_session& agent, http::exchange& ex,
                                   http::forward_options target) {
  auto relayed = co_await http::forward(ex, agent.stream, std::move(target));
  if (relayed.upstream_reusable) deps.commands.keep_agent(agent);
  co_return relayed.keep_alive;
}

// What a forwarded request that acts is called in the audit chain: "sandbox.files.put",
// "sandbox.sessions.exec", "sandbox.pty", "sandbox.code.run", "sandbox.code.contexts.restart"
// (the route's words, ids and names left out; `code` is a namespace, not a resource).
std::string forwarded_action(http::verb method, const std::string& agent_path) {
  std::string action = "sandbox";
  std::string path = agent_path.substr(0, agent_path.find('?'));
  std::size_t start = 1, part = 0;
  while (start <= path.size()) {
    auto slash = std::min(path.find('/', start), path.size());
    std::string word = path.substr(start, slash - start);
    // Even positions are resources (files, sessions, commands); odd ones their names, except
    // the verbs that follow a resource directly (files/mkdir, files/archive, git/push).
    bool is_name = part % 2 == 1 && word != "mkdir" && word != "move" && word != "archive" && word != "list" &&
                   word != "stat" && !(part == 1 && path.starts_with("/git/"));
    if (!word.empty() && !is_name) action += "." + word;
    if (!word.empty() && !(part == 0 && word == "code")) ++part;
    start = slash + 1;
  }
  if (method == http::verb::put) action += ".put";
  if (method == http::verb::delete_) action += ".delete";
  return action;
}

namespace {

// The agent's path for a public one: what follows /v1/sandboxes/{id}, with the query string
// (less any access_token, which is ours, not the agent's).
std::string agent_target(const http::exchange& ex) {
  std::string target(ex.parser.get().target());
  auto q = target.find('?');
  std::string path = target.substr(0, q);
  std::string query = q == std::string::npos ? "" : target.substr(q + 1);
  auto after = path.find('/', std::string("/v1/sandboxes/").size());
  std::string rest = after == std::string::npos ? "/" : path.substr(after);
  std::string kept;
  for (std::size_t start = 0; start < query.size();) {
    auto amp = query.find('&', start);
    std::string pair = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (pair.rfind("access_token=", 0) != 0 && !pair.empty()) kept += (kept.empty() ? "" : "&") + pair;
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return kept.empty() ? rest : rest + "?" + kept;
}

// Output of exec/code-run as server-sent events: the response starts with the first byte, so
// an error found before any output is still answered as a plain JSON error.
class sse_sink final : public sandbox::byte_sink {
 public:
  explicit sse_sink(http::exchange& ex) : writer_(ex) {}
  asio::awaitable<bool> write(std::string_view bytes) override {
    // No co_await inside && or ?: — GCC 12 miscompiles those.
    if (!started_) {
      started_ = true;
      const std::string content_type = "text/event-stream";
      bool head_ok = co_await writer_.start(200, content_type);
      ok_ = head_ok;
    }
    if (!ok_) co_return false;
    bool wrote = co_await writer_.write(bytes);
    ok_ = wrote;
    co_return ok_;
  }
  bool started() const { return started_; }
  asio::awaitable<bool> finish() {
    if (!ok_) co_return false;
    co_return co_await writer_.finish();
  }

 private:
  http::chunked_writer writer_;
  bool started_ = false;
  bool ok_ = true;
};

// Runs while events are produced: a client that disconnects between events is noticed here,
// not at the next write (which may never come), and the producer is abandoned at once.
asio::awaitable<void> watch_client(http::exchange& ex, sse_sink& sink, const bool& finished) {
  if (finished) co_return;  // the producer ended before it ever waited (bad input)
  auto space = ex.buffer.prepare(4096);
  auto [ec, n] = co_await ex.stream.socket().async_read_some(space, asio::as_tuple(asio::use_awaitable));
  if (!ec) {
    ex.buffer.commit(n);  // the client spoke (not a disconnect): keep its bytes, stop watching
    co_return;
  }
  if (!finished && sink.abandon) sink.abandon();
}

// A session's exec answers when its command is done, which may take up to exec_max_timeout_s;
// so does a git operation (a clone or push of a large repository over a slow link), and a code
// run, whose events start once the runs queued before it in its context are done.
bool runs_command(const http::exchange& ex, const std::string& agent_path) {
  if (ex.parser.get().method() != http::verb::post) return false;
  return (ex.path.size() >= 5 && ex.path.compare(ex.path.size() - 5, 5, "/exec") == 0) ||
         agent_path.starts_with("/git/") || agent_path.starts_with("/code/");
}

// A terminal acts although it arrives as a GET.
bool is_pty(const std::string& agent_path) { return agent_path == "/pty" || agent_path.starts_with("/pty?"); }

struct exec_call {
  dependencies& deps;
  const auth::principal& who;
  std::string sandbox_id;
  bool code_run;
  std::string body;
  std::string remote;
};

asio::awaitable<void> produce(exec_call& call, http::exchange& ex, sse_sink& sink, result<void>& outcome,
                              bool& finished) {
  const auto who = actor_of(call.who, ex.request_id, call.remote);
  if (call.code_run) {
    auto req = parse_code_run(call.body);
    if (!req)
      outcome = std::move(req).err();
    else
      outcome = co_await call.deps.commands.code_run_stream(call.who.org_id, call.sandbox_id, *req, sink, who);
  } else {
    auto req = parse_exec(call.body);
    if (!req)
      outcome = std::move(req).err();
    else
      outcome = co_await call.deps.commands.exec_stream(call.who.org_id, call.sandbox_id, std::move(*req), sink, who);
  }
  finished = true;
  boost::beast::error_code ignored;
  ex.stream.socket().cancel(ignored);  // ends watch_client
}

asio::awaitable<result<sandbox::exec_result>> run_whole(exec_call& call, const http::exchange& ex) {
  const auto who = actor_of(call.who, ex.request_id, call.remote);
  auto& commands = call.deps.commands;
  if (call.code_run) {
    auto req = parse_code_run(call.body);
    if (!req) co_return std::move(req).err();
    co_return co_await commands.code_run(call.who.org_id, call.sandbox_id, *req, who);
  }
  auto req = parse_exec(call.body);
  if (!req) co_return std::move(req).err();
  co_return co_await commands.exec(call.who.org_id, call.sandbox_id, std::move(*req), who);
}

// The whole result as one JSON answer. Encoding tens of megabytes takes hundreds of milliseconds:
// a large one is encoded on the answer workers. The answer's share of the budget is held until
// its last byte is written (a client that does not read holds it until the write's deadline).
asio::awaitable<bool> answer_whole(exec_call& call, http::exchange& ex, stream_call& answer) {
  auto r = co_await run_whole(call, ex);
  if (!r) {
    answer.answered(r.err());
    co_return co_await http::respond_error(ex, r.err());
  }
  std::shared_ptr<sandbox::budget_share> memory = std::move(r->memory);  // dropped here, on the I/O thread
  const std::size_t size = r->stdout_text.size() + r->stderr_text.size() + (r->stdout_b64 ? r->stdout_b64->size() : 0) +
                           (r->stderr_b64 ? r->stderr_b64->size() : 0);
  auto encode = [result = std::move(*r)]() mutable {
    http::response res{http::bhttp::status::ok, 11};
    res.set(http::bhttp::field::content_type, "application/json");
    res.body() = exec_answer_text(std::move(result));
    return res;
  };
  std::optional<http::response> res;
  if (size < sandbox::answer_workers::inline_bytes)
    res.emplace(encode());
  else
    res.emplace(co_await call.deps.answer_workers.run(std::move(encode)));
  res->set(http::bhttp::field::server, "sandfort");
  answer.answered(200);
  ex.stream.expires_after(std::chrono::seconds(call.deps.cfg.idle_timeout_s));  // as a plain response
  co_return co_await http::respond(ex, std::move(*res));
}

// POST …/process/exec and …/process/code-run: the whole result as JSON, or server-sent events
// when the client asks for them.
streamed_handler stream_exec(bool code_run) {
  return [code_run](dependencies& deps, http::exchange& ex, stream_call& answer) -> asio::awaitable<bool> {
    ex.stream.expires_after(std::chrono::seconds(deps.cfg.idle_timeout_s));  // as a plain request's body
    auto raw = co_await http::read_small_body(ex, deps.cfg.max_body_bytes);
    ex.stream.expires_never();  // the command runs as long as its own timeout
    if (!raw) {
      answer.answered(raw.err());
      co_return co_await http::respond_error(ex, raw.err());
    }
    exec_call call{deps, answer.who, ex.params["id"], code_run, std::move(*raw), ex.remote};
    if (!http::wants_event_stream(ex.parser.get())) co_return co_await answer_whole(call, ex, answer);
    sse_sink sink(ex);
    result<void> r = ok_t{};
    bool finished = false;
    using namespace asio::experimental::awaitable_operators;
    co_await (produce(call, ex, sink, r, finished) && watch_client(ex, sink, finished));
    if (!r && !sink.started()) {
      answer.answered(r.err());
      co_return co_await http::respond_error(ex, r.err());
    }
    answer.answered(200);  // the events began (an error after that is an event, not a status)
    co_return co_await sink.finish();
  };
}

// Everything the agent serves itself, relayed to the sandbox's agent.
asio::awaitable<bool> forward_to_agent(dependencies& deps, http::exchange& ex, stream_call& answer) {
  const auth::principal& p = answer.who;
  std::string id = ex.params["id"];
  const std::string agent_path = agent_target(ex);
  const auto method = ex.parser.get().method();
  // An action (not a read) is recorded in the audit chain once the sandbox is found, before it happens.
  const bool acts = method != http::verb::get || is_pty(agent_path);
  const audit::record note{forwarded_action(method, agent_path), "", "accepted",
                           {{"method", std::string(http::bhttp::to_string(method))},
                            {"path", agent_path.substr(0, 1024)}}};
  const auto who = actor_of(p, ex.request_id, ex.remote);
  auto agent = co_await deps.commands.connect_agent(p.org_id, id, who, acts ? &note : nullptr);
  if (!agent) {
    answer.answered(agent.err());
    co_return co_await http::respond_error(ex, agent.err());
  }
  http::forward_options target{agent_path, answer.subprotocol};
  // The agent is untrusted: its answer must start within the longest command a caller may
  // run (a session's exec) or soon (everything else), and a body that is not an event stream
  // must keep moving.
  auto idle = std::chrono::seconds(deps.cfg.agent_idle_timeout_s);
  target.answer_timeout = runs_command(ex, agent_path) ? std::chrono::seconds(deps.cfg.exec_max_timeout_s + 60) : idle;
  target.idle_timeout = idle;
  co_return co_await forward_over(deps, *agent, ex, std::move(target));
}

}  // namespace

std::vector<api_route> stream_routes() {
  using http::verb;
  using auth::permission;
  constexpr auto streamed = route_kind::streamed;
  constexpr auto forwarded = route_kind::forwarded;
  return {
      // Whole results too: one may be tens of megabytes, which this route writes itself while the
      // answer's share of the budget is held (answer_whole).
      {verb::post, "/v1/sandboxes/{id}/process/exec", permission::use_sandboxes, streamed, stream_exec(false)},
      {verb::post, "/v1/sandboxes/{id}/process/code-run", permission::use_sandboxes, streamed, stream_exec(true)},
      // Forwarded to the agent: reading needs `read`, anything that acts needs `use_sandboxes`.
      {verb::post, "/v1/sandboxes/{id}/exec", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/sessions", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/sessions", permission::read, forwarded, forward_to_agent},
      {verb::delete_, "/v1/sandboxes/{id}/sessions/{name}", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/sessions/{name}/exec", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/commands", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/commands", permission::read, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/commands/{cmd}", permission::read, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/commands/{cmd}/logs", permission::read, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/commands/{cmd}/stdin", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/commands/{cmd}/kill", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::put, "/v1/sandboxes/{id}/files", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/files", permission::read, forwarded, forward_to_agent},
      {verb::delete_, "/v1/sandboxes/{id}/files", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/files/list", permission::read, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/files/stat", permission::read, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/files/mkdir", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/files/move", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::put, "/v1/sandboxes/{id}/files/archive", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/files/archive", permission::read, forwarded, forward_to_agent},
      // Server-sent events while a directory changes: reading, though it holds a watch in the
      // agent (bounded per sandbox there) for as long as the client stays.
      {verb::get, "/v1/sandboxes/{id}/files/watch", permission::read, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/git/{op}", permission::use_sandboxes, forwarded, forward_to_agent},
      // Code contexts: stateful interpreters in the agent; a run answers server-sent events.
      {verb::post, "/v1/sandboxes/{id}/code/run", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/code/contexts", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/code/contexts", permission::read, forwarded, forward_to_agent},
      {verb::get, "/v1/sandboxes/{id}/code/contexts/{ctx}", permission::read, forwarded, forward_to_agent},
      {verb::delete_, "/v1/sandboxes/{id}/code/contexts/{ctx}", permission::use_sandboxes, forwarded, forward_to_agent},
      {verb::post, "/v1/sandboxes/{id}/code/contexts/{ctx}/restart", permission::use_sandboxes, forwarded,
       forward_to_agent},
      // An interactive terminal acts, though it arrives as a GET.
      {verb::get, "/v1/sandboxes/{id}/pty", permission::use_sandboxes, forwarded, forward_to_agent},
  };
}

}  // namespace sandfort::api
