// envd's filesystem.Filesystem/WatchDir (a Connect server stream) over the agent's directory
// watch: the same GET /files/watch the native /v1/sandboxes/{id}/files/watch forwards to, with its
// bounds (32 watches per sandbox, 1024 queued events per watch; docs/api.md). Its `start` is
// E2B's start event, create/write/remove/rename/chmod are FilesystemEvents, its keep-alive
// comments are keepalive events. What E2B has no event for ends the stream: `end` (the watched
// directory went) normally, `overflow` and `limit` with resource_exhausted (docs/e2b.md).
#include <chrono>
#include <deque>
#include <map>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "sandfort/core/ids.hpp"
#include "sandfort/http/proxy.hpp"
#include "wire.hpp"

namespace sandfort::compat::e2b {

namespace watch_wire {

namespace beast = boost::beast;

// One event of the agent's stream (an entry's path is the largest part of one).
constexpr std::size_t max_watch_event_bytes = 256u << 10;
// The agent's refusal (a JSON error) before the stream.
constexpr std::size_t max_watch_refusal_bytes = 64u << 10;
// The agent sends a keep-alive every 15 s: an agent silent for longer is gone.
constexpr auto agent_silence = std::chrono::seconds(60);

const char* event_type(const std::string& name) {
  if (name == "create") return "EVENT_TYPE_CREATE";
  if (name == "write") return "EVENT_TYPE_WRITE";
  if (name == "remove") return "EVENT_TYPE_REMOVE";
  if (name == "rename") return "EVENT_TYPE_RENAME";
  if (name == "chmod") return "EVENT_TYPE_CHMOD";
  return nullptr;
}

std::string text_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The agent's server-sent events as WatchDirResponse envelopes.
class watch_translator {
 public:
  // Adds the WatchDirResponse messages of `bytes` to `frames`; false once the stream is to end
  // (see ending).
  bool feed(std::string_view bytes, std::vector<json>& frames) {
    pending_.append(bytes);
    for (auto end = pending_.find("\n\n"); end != std::string::npos; end = pending_.find("\n\n")) {
      const std::string event = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      if (!translate(event, frames)) return false;
    }
    if (pending_.size() > max_watch_event_bytes) {
      ending = make_error(errc::internal, "an event of the agent's watch is too large");
      return false;
    }
    return true;
  }

  // Why the stream ends: an error for its trailer, or none (the watched directory went).
  std::optional<error> ending;
  bool ended = false;

 private:
  bool translate(const std::string& event, std::vector<json>& frames) {
    std::string name, data;
    bool comment = false;
    for (std::size_t start = 0; start < event.size();) {
      auto nl = std::min(event.find('\n', start), event.size());
      std::string_view line(event.data() + start, nl - start);
      if (line.starts_with("event: ")) name = line.substr(7);
      if (line.starts_with("data: ")) data.append(line.substr(6));
      if (line.starts_with(":")) comment = true;
      start = nl + 1;
    }
    if (name.empty()) {
      if (comment) frames.push_back(json{{"keepalive", json::object()}});
      return true;
    }
    const auto j = json::parse(data, nullptr, false);
    const json fields = j.is_object() ? j : json::object();
    if (name == "start") {
      frames.push_back(json{{"start", json::object()}});
      return true;
    }
    if (const char* type = event_type(name)) {
      frames.push_back(json{{"filesystem", json{{"name", text_of(fields, "name")}, {"type", type}}}});
      return true;
    }
    if (name == "end") {
      ended = true;
      return false;
    }
    if (name == "overflow" || name == "limit") {
      std::string why = text_of(fields, "message");
      if (name == "overflow")
        why = "events were dropped (" + std::to_string(fields.value("dropped", std::uint64_t{0})) +
              "): " + why + "; list the directory again and watch it anew";
      ending = make_error(errc::quota_exceeded, "watch ended (" + name + "): " + why);
      return false;
    }
    return true;  // an event this layer does not know: not E2B's either
  }

  std::string pending_;
};

// The agent's refusal before its stream began, as an error (429 quota_exceeded: the bounds).
error watch_refusal(unsigned status, const std::string& body) {
  const auto j = json::parse(body, nullptr, false);
  const json e = j.is_object() && j.contains("error") && j["error"].is_object() ? j["error"] : json::object();
  std::string message = text_of(e, "message");
  if (message.empty()) message = "the agent refused the watch (" + std::to_string(status) + ")";
  const std::string code = text_of(e, "code");
  if (status == 429 || code == "quota_exceeded") return make_error(errc::quota_exceeded, message);
  if (status == 404) return make_error(errc::not_found, message);
  if (status == 400) return make_error(errc::invalid_argument, message);
  if (status == 409) return make_error(errc::conflict, message);
  if (status == 403) return make_error(errc::permission_denied, message);
  return make_error(errc::unavailable, message);
}

struct watch_request {
  std::string path;
  bool recursive = false;
};

result<watch_request> parse_watch(const json& message) {
  watch_request w{text_of(message, "path")};
  if (w.path.empty()) return make_error(errc::invalid_argument, "path is required");
  if (auto r = message.find("recursive"); r != message.end() && r->is_boolean()) w.recursive = r->get<bool>();
  return w;
}

std::string watch_target(const watch_request& w) {
  return "/files/watch?path=" + query_escape(w.path) + "&recursive=" + (w.recursive ? "true" : "false");
}

std::string watch_trailer(const watch_translator& t, const result<void>& relayed) {
  json trailer = json::object();
  if (!relayed)
    trailer["error"] = connect_error_json(relayed.err());
  else if (t.ending)
    trailer["error"] = connect_error_json(*t.ending);
  return envelope(end_stream_flag, trailer);
}

json watcher_created(const std::string& id) { return json{{"watcherId", id}}; }

json fetched_events(std::deque<json>& events) {
  json out = json::array();
  for (auto& e : events) out.push_back(std::move(e));
  events.clear();
  return json{{"events", out}};
}

// The agent's watch, its answer's header read (200): its events follow in parser's body.
struct agent_watch {
  explicit agent_watch(sandbox::agent_session a) : agent(std::move(a)) { parser.body_limit(boost::none); }
  sandbox::agent_session agent;
  beast::flat_buffer buffer = http::bounded_read_buffer();
  beast::http::response_parser<beast::http::buffer_body> parser;
  char piece[16 * 1024];
};

// A watch of the sandbox's agent, or the agent's refusal of it (429 quota_exceeded: the bounds).
awaitable<result<std::unique_ptr<agent_watch>>> open_watch(dependencies& deps, const sandbox_call& call,
                                                           const watch_request& wr, const audit::actor& who) {
  auto agent = co_await deps.commands.connect_agent(call.org_id, call.sandbox_id, who, nullptr);
  if (!agent) co_return agent.err();
  auto w = std::make_unique<agent_watch>(std::move(*agent));
  http::request req{http::verb::get, watch_target(wr), 11};
  req.set(http::bhttp::field::host, "agent");
  req.set(http::bhttp::field::accept, "text/event-stream");
  auto& stream = w->agent.stream;
  stream.lowest().expires_after(std::chrono::seconds(30));
  auto [wec, wn] = co_await beast::http::async_write(stream, req, asio::as_tuple(asio::use_awaitable));
  (void)wn;
  if (wec) co_return make_error(errc::unavailable, "the sandbox's agent did not take the watch");
  auto [hec, hn] = co_await beast::http::async_read_header(stream, w->buffer, w->parser,
                                                           asio::as_tuple(asio::use_awaitable));
  (void)hn;
  if (hec) co_return make_error(errc::unavailable, "the sandbox's agent did not answer the watch");
  const unsigned status = w->parser.get().result_int();
  if (status == 200) co_return w;
  std::string body;
  while (!w->parser.is_done() && body.size() < max_watch_refusal_bytes) {
    w->parser.get().body().data = w->piece;
    w->parser.get().body().size = sizeof w->piece;
    auto [ec, n] = co_await beast::http::async_read_some(stream, w->buffer, w->parser,
                                                         asio::as_tuple(asio::use_awaitable));
    (void)n;
    body.append(w->piece, sizeof w->piece - w->parser.get().body().size);
    if (ec && ec != beast::http::error::need_buffer) break;
  }
  co_return watch_refusal(status, body);
}

// The next messages of the watch into `messages`: false once it ended (t says why).
awaitable<result<bool>> next_messages(agent_watch& w, watch_translator& t, std::vector<json>& messages) {
  if (w.parser.is_done()) co_return false;
  w.parser.get().body().data = w.piece;
  w.parser.get().body().size = sizeof w.piece;
  w.agent.stream.lowest().expires_after(agent_silence);
  auto [ec, n] = co_await beast::http::async_read_some(w.agent.stream, w.buffer, w.parser,
                                                       asio::as_tuple(asio::use_awaitable));
  (void)n;
  if (ec && ec != beast::http::error::need_buffer)
    co_return make_error(errc::unavailable, "the agent's watch broke: " + ec.message());
  const std::size_t got = sizeof w.piece - w.parser.get().body().size;
  co_return t.feed(std::string_view(w.piece, got), messages);
}

// The agent's events into the client's stream until either ends.
awaitable<result<void>> relay_watch(agent_watch& w, http::chunked_writer& out, watch_translator& t, bool& client_left) {
  std::vector<json> messages;
  for (;;) {
    messages.clear();
    auto more = co_await next_messages(w, t, messages);
    if (!more) co_return more.err();
    for (const auto& m : messages) {
      const std::string frame = envelope(0, m);
      if (co_await out.write(frame)) continue;
      client_left = true;
      co_return result<void>{};
    }
    if (!*more) co_return result<void>{};
  }
}

// POST /filesystem.Filesystem/WatchDir.
awaitable<bool> watch_dir(dependencies& deps, http::exchange& ex, api::stream_call& sc) {
  bool keep = false;
  auto begun = co_await begin_stream(deps, ex, sc, keep);
  if (!begun) co_return keep;
  const sandbox_call* call = &begun->call;
  auto wr = parse_watch(begun->message);
  if (!wr) co_return co_await http::respond(ex, stream_error(wr.err(), ex.request_id));
  auto w = co_await open_watch(deps, *call, *wr, token_actor(*call, ex.request_id, ex.remote));
  if (!w) {
    sc.answered(w.err());
    co_return co_await http::respond(ex, stream_error(w.err(), ex.request_id));
  }
  sc.answered(200u);
  http::chunked_writer out(ex);
  if (!co_await out.start(200, "application/connect+json")) co_return false;
  watch_translator t;
  bool client_left = false;
  using namespace asio::experimental::awaitable_operators;
  // A client that leaves while the directory is quiet ends the agent's watch at once.
  auto first = co_await (relay_watch(**w, out, t, client_left) || http::until_client_leaves(ex));
  if (first.index() == 1 || client_left) co_return false;
  const std::string trailer = watch_trailer(t, std::get<0>(first));
  if (!co_await out.write(trailer)) co_return false;
  co_return co_await out.finish();
}

// The poll form (CreateWatcher, GetWatcherEvents, RemoveWatcher: what E2B's Python SDK uses): a
// watch held here, its events queued until fetched. Bounded like a stream's: the agent's 32
// watches per sandbox (streams and polled ones together), 1024 unfetched events per watcher
// (beyond, the watcher ends: fetching tells why), and a watcher not fetched for 10 minutes ends.
constexpr std::size_t max_polled_events = 1024;
constexpr std::size_t max_poll_watchers = 1024;
constexpr auto poll_idle = std::chrono::minutes(10);

struct poll_watcher {
  std::string sandbox_id;
  std::string id;
  agent_watch* live = nullptr;  // while fill_watcher reads it (its frame owns it)
  std::deque<json> events;
  std::optional<error> ended;
  std::chrono::steady_clock::time_point fetched = std::chrono::steady_clock::now();
  bool removed = false;
};

std::map<std::pair<std::string, std::string>, std::shared_ptr<poll_watcher>>& poll_watchers() {
  static std::map<std::pair<std::string, std::string>, std::shared_ptr<poll_watcher>> all;
  return all;
}

// What ended a watcher, once its events are fetched.
error poll_ending(const watch_translator& t, const result<bool>& more, bool overflowed, bool idle) {
  if (overflowed)
    return make_error(errc::quota_exceeded, "watch ended: more than 1024 events were not fetched; list the "
                                            "directory again and watch it anew");
  if (idle) return make_error(errc::not_found, "watch ended: not fetched for 10 minutes");
  if (!more) return more.err();
  if (t.ending) return *t.ending;
  return make_error(errc::not_found, "watch ended: the watched directory was removed or moved");
}

awaitable<void> fill_watcher(std::shared_ptr<poll_watcher> p, std::unique_ptr<agent_watch> watch) {
  p->live = watch.get();
  watch_translator t;
  std::vector<json> messages;
  for (;;) {
    messages.clear();
    auto more = co_await next_messages(*watch, t, messages);
    if (p->removed) break;
    bool overflowed = false;
    for (auto& m : messages)
      if (m.contains("filesystem")) {
        overflowed = overflowed || p->events.size() >= max_polled_events;
        if (!overflowed) p->events.push_back(std::move(m["filesystem"]));
      }
    const bool idle = std::chrono::steady_clock::now() - p->fetched > poll_idle;
    if (!more || !*more || overflowed || idle) {
      p->ended = poll_ending(t, more, overflowed, idle);
      if (idle) poll_watchers().erase({p->sandbox_id, p->id});
      break;
    }
  }
  p->live = nullptr;  // the agent's watch ends with its connection, as `watch` goes
}

std::string watcher_id_of(const json& message) {
  std::string id = text_of(message, "watcherId");
  return id.empty() ? text_of(message, "watcher_id") : id;
}

awaitable<http::response> poll_rpc(dependencies& deps, http::context& ctx, const auth::principal&) {
  auto call = authorize(deps, ctx.req);
  if (!call) co_return refuse_call(call.err(), ctx.request_id);
  if (call->port == interpreter_port) co_return interpreter_not_served();
  const auto message = json::parse(ctx.req.body().empty() ? std::string("{}") : ctx.req.body(), nullptr, false);
  if (!message.is_object())
    co_return connect_error(make_error(errc::invalid_argument, "the message is not a JSON object"), ctx.request_id);
  const std::string method = ctx.path.substr(ctx.path.find_last_of('/') + 1);
  if (method == "CreateWatcher") {
    auto wr = parse_watch(message);
    if (!wr) co_return connect_error(wr.err(), ctx.request_id);
    if (poll_watchers().size() >= max_poll_watchers)
      co_return connect_error(make_error(errc::quota_exceeded, "this server holds 1024 watchers: remove one first"),
                              ctx.request_id);
    auto w = co_await open_watch(deps, *call, *wr, token_actor(*call, ctx.request_id, ctx.remote));
    if (!w) co_return connect_error(w.err(), ctx.request_id);
    auto p = std::make_shared<poll_watcher>();
    p->sandbox_id = call->sandbox_id;
    p->id = random_hex(16);
    poll_watchers()[{p->sandbox_id, p->id}] = p;
    auto executor = (*w)->agent.stream.get_executor();
    asio::co_spawn(executor, fill_watcher(p, std::move(*w)), asio::detached);
    co_return http::json_response(200, watcher_created(p->id));
  }
  const std::string id = watcher_id_of(message);
  auto it = poll_watchers().find({call->sandbox_id, id});
  if (it == poll_watchers().end())
    co_return connect_error(make_error(errc::not_found, "no watcher " + id.substr(0, 64) + " in this sandbox"),
                            ctx.request_id);
  auto p = it->second;
  if (method == "RemoveWatcher") {
    poll_watchers().erase(it);
    p->removed = true;
    if (p->live) p->live->agent.stream.cancel();  // fill_watcher drops it
    co_return http::json_response(200, json::object());
  }
  p->fetched = std::chrono::steady_clock::now();
  if (p->events.empty() && p->ended) {
    poll_watchers().erase(it);
    co_return connect_error(*p->ended, ctx.request_id);
  }
  co_return http::json_response(200, fetched_events(p->events));
}

}  // namespace watch_wire

std::vector<api::api_route> watch_routes() {
  // No API key: the handler authorizes the sandbox's access token first.
  api::api_route watch{http::verb::post, "/e2b-sandbox/filesystem.Filesystem/WatchDir", std::nullopt,
                       api::route_kind::streamed, watch_wire::watch_dir};
  watch.dialect = sandbox_dialect();
  std::vector<api::api_route> all;
  all.push_back(std::move(watch));
  for (const char* method : {"CreateWatcher", "GetWatcherEvents", "RemoveWatcher"}) {
    api::api_route poll{http::verb::post, std::string("/e2b-sandbox/filesystem.Filesystem/") + method, std::nullopt,
                        watch_wire::poll_rpc};
    poll.dialect = sandbox_dialect();
    all.push_back(std::move(poll));
  }
  return all;
}

}  // namespace sandfort::compat::e2b
