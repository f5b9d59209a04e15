// Routes that stream: exec and code-run as server-sent events, and everything the agent
// serves itself (sessions, background commands, files, the PTY), forwarded to the
// sandbox's agent with bodies in pieces and WebSockets spliced.
#include <chrono>
#include <memory>
#include <optional>
#include <spdlog/spdlog.h>
#include <unordered_map>

#include "routes.hpp"
#include "sandbox_bodies.hpp"
#include "sandfort/http/proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

namespace sandfort::api {

namespace asio = boost::asio;

namespace {

std::string field(const http::bhttp::request_header<>& h, http::bhttp::field f) {
  auto it = h.find(f);
  return it == h.end() ? std::string() : std::string(it->value());
}

// Browsers cannot set headers on a WebSocket: they offer `bearer.<token>` as a subprotocol
// or put it in ?access_token=. Returns the Authorization value and the subprotocol to echo.
std::pair<std::string, std::string> credentials(const http::exchange& ex) {
  const auto& h = ex.parser.get();
  if (auto auth = field(h, http::bhttp::field::authorization); !auth.empty()) return {auth, ""};
  std::string offered = field(h, http::bhttp::field::sec_websocket_protocol);
  for (std::size_t start = 0; start < offered.size();) {
    auto comma = offered.find(',', start);
    std::string one = offered.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    one.erase(0, one.find_first_not_of(' '));
    one.erase(one.find_last_not_of(' ') + 1);
    if (one.rfind("bearer.", 0) == 0) return {"Bearer " + one.substr(7), one};
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (auto it = ex.query.find("access_token"); it != ex.query.end()) return {"Bearer " + it->second, ""};
  return {"", ""};
}

// What a forwarded request that acts is called in the audit chain: "sandbox.files.put",
// "sandbox.sessions.exec", "sandbox.pty" (the route's words, ids and names left out).
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
    if (!word.empty()) ++part;
    start = slash + 1;
  }
  if (method == http::verb::put) action += ".put";
  if (method == http::verb::delete_) action += ".delete";
  return action;
}

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

void log_exchange(const http::exchange& ex, const std::string& org, unsigned status_hint,
                  std::chrono::steady_clock::time_point started) {
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  spdlog::info("{} {} stream {:.1f}ms org={} id={}{}", std::string(ex.parser.get().method_string()), ex.path, ms, org,
               ex.request_id, status_hint ? " status=" + std::to_string(status_hint) : "");
}

// What each streamed request answered, for the request metrics. Its handler writes the answer
// itself, so it notes the status here, and the wrapper that times the route (which alone knows the
// route's pattern) takes it when the exchange ends. Keyed by the exchange, which lives as long as
// its request; one thread. Never noted: 0, the agent's answer relayed unread.
class stream_statuses {
 public:
  void note(const http::exchange& ex, unsigned status) { by_exchange_[&ex] = status; }
  void note(const http::exchange& ex, const error& e) { note(ex, static_cast<unsigned>(http_status(e.code))); }
  unsigned take(const http::exchange& ex) {
    auto it = by_exchange_.find(&ex);
    if (it == by_exchange_.end()) return 0;
    unsigned status = it->second;
    by_exchange_.erase(it);
    return status;
  }

 private:
  std::unordered_map<const http::exchange*, unsigned> by_exchange_;
};

// Times every streamed route and counts it under its pattern (observe_request).
http::stream_handler measured(std::shared_ptr<stream_statuses> statuses, const http::stream_route& r,
                              http::stream_handler inner) {
  return [statuses, pattern = r.pattern, method = r.method,
          inner = std::move(inner)](http::exchange& ex) -> asio::awaitable<bool> {
    struct done {  // also when the handler throws, so that no status is left behind
      stream_statuses& statuses;
      http::exchange& ex;
      const std::string& pattern;
      http::verb method;
      std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
      ~done() {
        observe_request(pattern, method, statuses.take(ex),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
    } on_end{*statuses, ex, pattern, method};
    co_return co_await inner(ex);
  };
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
// so does a git operation (a clone or push of a large repository over a slow link).
bool runs_command(const http::exchange& ex, const std::string& agent_path) {
  if (ex.parser.get().method() != http::verb::post) return false;
  return (ex.path.size() >= 5 && ex.path.compare(ex.path.size() - 5, 5, "/exec") == 0) ||
         agent_path.starts_with("/git/");
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
      outcome = co_await call.deps.sandboxes.commands().code_run_stream(call.who.org_id, call.sandbox_id, *req, sink, who);
  } else {
    auto req = parse_exec(call.body);
    if (!req)
      outcome = std::move(req).err();
    else
      outcome = co_await call.deps.sandboxes.commands().exec_stream(call.who.org_id, call.sandbox_id, std::move(*req), sink, who);
  }
  finished = true;
  boost::beast::error_code ignored;
  ex.stream.socket().cancel(ignored);  // ends watch_client
}

asio::awaitable<result<sandbox::exec_result>> run_whole(exec_call& call, const http::exchange& ex) {
  const auto who = actor_of(call.who, ex.request_id, call.remote);
  auto& commands = call.deps.sandboxes.commands();
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
asio::awaitable<bool> answer_whole(exec_call& call, http::exchange& ex, stream_statuses& statuses) {
  auto r = co_await run_whole(call, ex);
  if (!r) {
    statuses.note(ex, r.err());
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
  statuses.note(ex, 200);
  ex.stream.expires_after(std::chrono::seconds(call.deps.cfg.idle_timeout_s));  // as a plain response
  co_return co_await http::respond(ex, std::move(*res));
}

}  // namespace

http::stream_selector make_stream_selector(dependencies d) {
  auto deps = std::make_shared<dependencies>(d);
  auto statuses = std::make_shared<stream_statuses>();

  // Authenticates, then runs body(ex, principal); answers auth failures itself.
  // Then refuses what acts while the state disk is full (admit_on_state_disk).
  auto authed = [deps, statuses](auth::permission needs, std::string route, auto body) -> http::stream_handler {
    return [deps, statuses, needs, route, body](http::exchange& ex) -> asio::awaitable<bool> {
      auto started = std::chrono::steady_clock::now();
      auto [bearer, subprotocol] = credentials(ex);
      auto who = co_await authorize(*deps, bearer, needs, ex.request_id, ex.remote);
      if (who) {
        if (auto room = admit_on_state_disk(*deps, ex.parser.get().method(), route); !room) who = std::move(room).err();
      }
      if (!who) {
        statuses->note(ex, who.err());
        log_exchange(ex, "", static_cast<unsigned>(http_status(who.err().code)), started);
        co_return co_await http::respond_error(ex, who.err());
      }
      bool keep = co_await body(ex, *who, subprotocol);
      log_exchange(ex, who->org_id, 0, started);
      co_return keep;
    };
  };

  auto stream_exec = [deps, statuses](bool code_run) {
    return [deps, statuses, code_run](http::exchange& ex, const auth::principal& p, const std::string&) -> asio::awaitable<bool> {
      ex.stream.expires_after(std::chrono::seconds(deps->cfg.idle_timeout_s));  // as a plain request's body
      auto raw = co_await http::read_small_body(ex, deps->cfg.max_body_bytes);
      ex.stream.expires_never();  // the command runs as long as its own timeout
      if (!raw) {
        statuses->note(ex, raw.err());
        co_return co_await http::respond_error(ex, raw.err());
      }
      exec_call call{*deps, p, ex.params["id"], code_run, std::move(*raw), ex.remote};
      if (!http::wants_event_stream(ex.parser.get())) co_return co_await answer_whole(call, ex, *statuses);
      sse_sink sink(ex);
      result<void> r = ok_t{};
      bool finished = false;
      using namespace asio::experimental::awaitable_operators;
      co_await (produce(call, ex, sink, r, finished) && watch_client(ex, sink, finished));
      if (!r && !sink.started()) {
        statuses->note(ex, r.err());
        co_return co_await http::respond_error(ex, r.err());
      }
      statuses->note(ex, 200);  // the events began (an error after that is an event, not a status)
      co_return co_await sink.finish();
    };
  };

  auto forward = [deps, statuses](http::exchange& ex, const auth::principal& p, const std::string& subprotocol) -> asio::awaitable<bool> {
    std::string id = ex.params["id"];
    const std::string agent_path = agent_target(ex);
    const auto method = ex.parser.get().method();
    // An action (not a read) is recorded in the audit chain once the sandbox is found, before it happens.
    const bool acts = method != http::verb::get || is_pty(agent_path);
    const audit::record note{forwarded_action(method, agent_path), "", "accepted",
                             {{"method", std::string(http::bhttp::to_string(method))},
                              {"path", agent_path.substr(0, 1024)}}};
    const auto who = actor_of(p, ex.request_id, ex.remote);
    auto agent = co_await deps->sandboxes.commands().connect_agent(p.org_id, id, who, acts ? &note : nullptr);
    if (!agent) {
      statuses->note(ex, agent.err());
      co_return co_await http::respond_error(ex, agent.err());
    }
    http::forward_options target{agent_path, subprotocol};
    // The agent is untrusted: its answer must start within the longest command a caller may
    // run (a session's exec) or soon (everything else), and a body that is not an event stream
    // must keep moving.
    auto idle = std::chrono::seconds(deps->cfg.agent_idle_timeout_s);
    target.answer_timeout =
        runs_command(ex, agent_path) ? std::chrono::seconds(deps->cfg.exec_max_timeout_s + 60) : idle;
    target.idle_timeout = idle;
    co_return co_await http::forward(ex, agent->stream, std::move(target));
  };

  using http::verb;
  using auth::permission;
  // Whole results too: one may be tens of megabytes, which this route writes itself while the
  // answer's share of the budget is held (answer_whole).
  std::vector<http::stream_route> routes = {
      {verb::post, "/v1/sandboxes/{id}/process/exec",
       authed(permission::use_sandboxes, "/v1/sandboxes/{id}/process/exec", stream_exec(false))},
      {verb::post, "/v1/sandboxes/{id}/process/code-run",
       authed(permission::use_sandboxes, "/v1/sandboxes/{id}/process/code-run", stream_exec(true))},
  };
  // Forwarded to the agent: reading needs `read`, anything that acts needs `use_sandboxes`.
  const std::pair<verb, const char*> agent_paths[] = {
      {verb::post, "/exec"},
      {verb::post, "/sessions"},          {verb::get, "/sessions"},
      {verb::delete_, "/sessions/{name}"}, {verb::post, "/sessions/{name}/exec"},
      {verb::post, "/commands"},          {verb::get, "/commands"},
      {verb::get, "/commands/{cmd}"},     {verb::get, "/commands/{cmd}/logs"},
      {verb::post, "/commands/{cmd}/stdin"}, {verb::post, "/commands/{cmd}/kill"},
      {verb::put, "/files"},              {verb::get, "/files"},
      {verb::delete_, "/files"},          {verb::get, "/files/list"},
      {verb::get, "/files/stat"},         {verb::post, "/files/mkdir"},
      {verb::post, "/files/move"},        {verb::put, "/files/archive"},
      {verb::get, "/files/archive"},
      {verb::post, "/git/{op}"},
  };
  for (const auto& [method, suffix] : agent_paths) {
    auto needs = method == verb::get ? permission::read : permission::use_sandboxes;
    const std::string route = std::string("/v1/sandboxes/{id}") + suffix;
    routes.push_back({method, route, authed(needs, route, forward)});
  }
  // An interactive terminal acts, though it arrives as a GET.
  routes.push_back({verb::get, "/v1/sandboxes/{id}/pty", authed(permission::use_sandboxes, "/v1/sandboxes/{id}/pty", forward)});
  for (auto& r : routes) r.fn = measured(statuses, r, std::move(r.fn));
  return http::make_stream_selector(std::move(routes));
}

}  // namespace sandfort::api
