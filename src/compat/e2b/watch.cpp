// envd's filesystem.Filesystem/WatchDir (a Connect server stream) over the agent's directory
// watch: the same GET /files/watch the native /v1/sandboxes/{id}/files/watch forwards to, with its
// bounds (32 watches per sandbox, 1024 queued events per watch; docs/api.md). Its `start` is
// E2B's start event, create/write/remove/rename/chmod are FilesystemEvents, its keep-alive
// comments are keepalive events. What E2B has no event for ends the stream: `end` (the watched
// directory went) normally, `overflow` and `limit` with resource_exhausted (docs/e2b.md).
#include <chrono>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

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
  // Adds the envelopes for `bytes` to `frames`; false once the stream is to end (see ending).
  bool feed(std::string_view bytes, std::vector<std::string>& frames) {
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
  bool translate(const std::string& event, std::vector<std::string>& frames) {
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
      if (comment) frames.push_back(envelope(0, json{{"keepalive", json::object()}}));
      return true;
    }
    const auto j = json::parse(data, nullptr, false);
    const json fields = j.is_object() ? j : json::object();
    if (name == "start") {
      frames.push_back(envelope(0, json{{"start", json::object()}}));
      return true;
    }
    if (const char* type = event_type(name)) {
      frames.push_back(envelope(0, json{{"filesystem", json{{"name", text_of(fields, "name")}, {"type", type}}}}));
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

// The agent's events into the client's stream until either ends.
awaitable<result<void>> relay_watch(http::any_stream& agent, beast::flat_buffer& buffer,
                                    beast::http::response_parser<beast::http::buffer_body>& parser,
                                    http::chunked_writer& out, watch_translator& t, bool& client_left) {
  auto piece = std::make_unique<char[]>(16 * 1024);
  std::vector<std::string> frames;
  while (!parser.is_done()) {
    parser.get().body().data = piece.get();
    parser.get().body().size = 16 * 1024;
    agent.lowest().expires_after(agent_silence);
    auto [ec, n] = co_await beast::http::async_read_some(agent, buffer, parser, asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (ec && ec != beast::http::error::need_buffer)
      co_return make_error(errc::unavailable, "the agent's watch broke: " + ec.message());
    const std::size_t got = 16 * 1024 - parser.get().body().size;
    frames.clear();
    const bool more = t.feed(std::string_view(piece.get(), got), frames);
    for (const auto& frame : frames) {
      if (co_await out.write(frame)) continue;
      client_left = true;
      co_return result<void>{};
    }
    if (!more) co_return result<void>{};
  }
  co_return result<void>{};
}

// POST /filesystem.Filesystem/WatchDir.
awaitable<bool> watch_dir(dependencies& deps, http::exchange& ex, api::stream_call& sc) {
  auto call = authorize(deps, ex.parser.get());
  if (!call) {
    sc.answered(call.err());
    co_return co_await http::respond(ex, refuse_call(call.err(), ex.request_id));
  }
  if (call->port == interpreter_port) co_return co_await http::respond(ex, interpreter_not_served());
  auto message = co_await streaming_message(ex);
  if (!message) co_return co_await http::respond(ex, stream_error(message.err(), ex.request_id));
  auto w = parse_watch(*message);
  if (!w) co_return co_await http::respond(ex, stream_error(w.err(), ex.request_id));
  auto agent = co_await deps.commands.connect_agent(call->org_id, call->sandbox_id,
                                                    token_actor(*call, ex.request_id, ex.remote), nullptr);
  if (!agent) co_return co_await http::respond(ex, stream_error(agent.err(), ex.request_id));
  http::request req{http::verb::get, watch_target(*w), 11};
  req.set(http::bhttp::field::host, "agent");
  req.set(http::bhttp::field::accept, "text/event-stream");
  agent->stream.lowest().expires_after(std::chrono::seconds(30));
  auto [wec, wn] = co_await beast::http::async_write(agent->stream, req, asio::as_tuple(asio::use_awaitable));
  (void)wn;
  const auto unavailable = make_error(errc::unavailable, "the sandbox's agent did not answer");
  if (wec) co_return co_await http::respond(ex, stream_error(unavailable, ex.request_id));
  beast::flat_buffer buffer = http::bounded_read_buffer();
  beast::http::response_parser<beast::http::buffer_body> parser;
  parser.body_limit(boost::none);
  auto [hec, hn] = co_await beast::http::async_read_header(agent->stream, buffer, parser,
                                                           asio::as_tuple(asio::use_awaitable));
  (void)hn;
  if (hec) co_return co_await http::respond(ex, stream_error(unavailable, ex.request_id));
  if (const unsigned status = parser.get().result_int(); status != 200) {
    std::string body;
    auto piece = std::make_unique<char[]>(4096);
    while (!parser.is_done() && body.size() < max_watch_refusal_bytes) {
      parser.get().body().data = piece.get();
      parser.get().body().size = 4096;
      auto [ec, n] = co_await beast::http::async_read_some(agent->stream, buffer, parser,
                                                           asio::as_tuple(asio::use_awaitable));
      (void)n;
      body.append(piece.get(), 4096 - parser.get().body().size);
      if (ec && ec != beast::http::error::need_buffer) break;
    }
    const error refused = watch_refusal(status, body);
    sc.answered(refused);
    co_return co_await http::respond(ex, stream_error(refused, ex.request_id));
  }
  sc.answered(200u);
  http::chunked_writer out(ex);
  if (!co_await out.start(200, "application/connect+json")) co_return false;
  watch_translator t;
  bool client_left = false;
  using namespace asio::experimental::awaitable_operators;
  // A client that leaves while the directory is quiet ends the agent's watch at once.
  auto first = co_await (relay_watch(agent->stream, buffer, parser, out, t, client_left) ||
                         http::until_client_leaves(ex));
  if (first.index() == 1 || client_left) co_return false;
  const std::string trailer = watch_trailer(t, std::get<0>(first));
  if (!co_await out.write(trailer)) co_return false;
  co_return co_await out.finish();
}

}  // namespace watch_wire

std::vector<api::api_route> watch_routes() {
  // No API key: the handler authorizes the sandbox's access token first.
  api::api_route watch{http::verb::post, "/e2b-sandbox/filesystem.Filesystem/WatchDir", std::nullopt,
                       api::route_kind::streamed, watch_wire::watch_dir};
  watch.dialect = sandbox_dialect();
  std::vector<api::api_route> all;
  all.push_back(std::move(watch));
  return all;
}

}  // namespace sandfort::compat::e2b
