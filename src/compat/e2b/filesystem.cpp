// envd's filesystem.Filesystem unary RPCs (Connect, JSON) and GET /files, through the same agent
// file operations the native /v1/sandboxes/{id}/files routes forward to: the agent resolves every
// path inside the sandbox's own filesystem. Uploads (POST /files) are streamed (files_stream.cpp),
// WatchDir and the poll form of watching are watch.cpp's.
#include <boost/asio/as_tuple.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>

#include "sandfort/http/client.hpp"
#include "sandfort/http/proxy.hpp"
#include "wire.hpp"

namespace sandfort::compat::e2b {

namespace beast = boost::beast;

namespace {

// An agent's answer to one file operation: a listing of one directory is the largest.
constexpr std::size_t max_agent_answer_bytes = 8u << 20;
// A ListDir of depth > 1 walks directory by directory; it stops at this many entries.
constexpr std::size_t max_listed_entries = 10000;
constexpr auto agent_call_timeout = std::chrono::seconds(30);

}  // namespace

std::string query_escape(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

namespace {

// The agent's refusal as Connect's: its class, its message.
http::response agent_refusal(const agent_answer& a, const std::string& request_id) {
  const json& e = a.body.is_object() ? a.body.value("error", json::object()) : json::object();
  const std::string code = e.is_object() ? e.value("code", std::string("internal")) : std::string("internal");
  const std::string message = e.is_object() ? e.value("message", std::string("the agent refused")) : std::string();
  const char* connect_code = code == "not_found"           ? "not_found"
                             : code == "conflict"          ? "already_exists"
                             : code == "invalid_argument"  ? "invalid_argument"
                             : code == "permission_denied" ? "permission_denied"
                                                           : "internal";
  auto res = http::json_response(a.status >= 400 ? a.status : 500, {{"code", connect_code}, {"message", message}});
  res.set("X-Request-Id", request_id);
  return res;
}

// The agent's entry ({name, path, type, size, mode, mtime, target}) as envd's EntryInfo.
json entry_info(const json& e) {
  const std::string type = e.value("type", std::string());
  json out = {{"name", e.value("name", std::string())},
              {"type", type == "dir" ? "FILE_TYPE_DIRECTORY" : type == "file" ? "FILE_TYPE_FILE"
                       : type == "symlink" ? "FILE_TYPE_SYMLINK" : "FILE_TYPE_UNSPECIFIED"},
              {"path", e.value("path", std::string())},
              {"size", std::to_string(e.value("size", std::int64_t{0}))}};
  const std::string mode = e.value("mode", std::string());
  if (!mode.empty()) out["mode"] = std::stoul(mode, nullptr, 8) & 07777;
  if (e.contains("mtime") && e["mtime"].is_string()) out["modifiedTime"] = e["mtime"];
  if (e.contains("target") && e["target"].is_string()) out["symlinkTarget"] = e["target"];
  return out;
}

result<std::string> string_field(const json& message, const char* key) {
  auto it = message.find(key);
  if (it == message.end() || !it->is_string() || it->get<std::string>().empty())
    return make_error(errc::invalid_argument, std::string(key) + " is required");
  return it->get<std::string>();
}

http::response ok(const json& message) { return http::json_response(200, message); }

// One RPC: the message in, the answer (or a Connect error) out.
awaitable<http::response> answer_rpc(dependencies& deps, const sandbox_call& call, const std::string& method,
                                     const json& message, const audit::actor& who, const std::string& request_id) {
  auto bad = [&](const error& e) { return connect_error(e, request_id); };
  if (method == "Stat") {
    auto path = string_field(message, "path");
    if (!path) co_return bad(path.err());
    auto a = co_await call_agent(deps, call, http::verb::get, "/files/stat?path=" + query_escape(*path), nullptr, who);
    if (!a) co_return bad(a.err());
    if (a->status != 200) co_return agent_refusal(*a, request_id);
    co_return ok({{"entry", entry_info(a->body)}});
  }
  if (method == "ListDir") {
    auto path = string_field(message, "path");
    if (!path) co_return bad(path.err());
    const std::int64_t depth = std::max<std::int64_t>(1, message.value("depth", std::int64_t{1}));
    json entries = json::array();
    std::vector<std::pair<std::string, std::int64_t>> todo{{*path, 1}};
    while (!todo.empty()) {
      auto [dir, level] = todo.back();
      todo.pop_back();
      auto a = co_await call_agent(deps, call, http::verb::get, "/files/list?path=" + query_escape(dir), nullptr, who);
      if (!a) co_return bad(a.err());
      if (a->status != 200) {
        if (level == 1) co_return agent_refusal(*a, request_id);
        continue;  // a directory that went away while walking
      }
      for (const auto& e : a->body.value("items", json::array())) {
        if (entries.size() >= max_listed_entries)
          co_return bad(make_error(errc::invalid_argument, "more than 10000 entries: list a smaller depth"));
        entries.push_back(entry_info(e));
        if (level < depth && e.value("type", std::string()) == "dir") todo.emplace_back(e.value("path", std::string()), level + 1);
      }
    }
    co_return ok({{"entries", entries}});
  }
  if (method == "MakeDir") {
    auto path = string_field(message, "path");
    if (!path) co_return bad(path.err());
    const json body = {{"path", *path}, {"parents", true}};
    auto a = co_await call_agent(deps, call, http::verb::post, "/files/mkdir", &body, who);
    if (!a) co_return bad(a.err());
    if (a->status == 200) co_return http::json_response(409, {{"code", "already_exists"}, {"message", *path + " exists"}});
    if (a->status != 201) co_return agent_refusal(*a, request_id);
    co_return ok({{"entry", entry_info(a->body)}});
  }
  if (method == "Move") {
    auto from = string_field(message, "source");
    if (!from) co_return bad(from.err());
    auto to = string_field(message, "destination");
    if (!to) co_return bad(to.err());
    const json body = {{"from", *from}, {"to", *to}, {"overwrite", true}};
    auto a = co_await call_agent(deps, call, http::verb::post, "/files/move", &body, who);
    if (!a) co_return bad(a.err());
    if (a->status != 200) co_return agent_refusal(*a, request_id);
    co_return ok({{"entry", entry_info(a->body)}});
  }
  if (method == "Remove") {
    auto path = string_field(message, "path");
    if (!path) co_return bad(path.err());
    auto a = co_await call_agent(deps, call, http::verb::delete_,
                                 "/files?recursive=true&path=" + query_escape(*path), nullptr, who);
    if (!a) co_return bad(a.err());
    if (a->status != 204) co_return agent_refusal(*a, request_id);
    co_return ok(json::object());
  }
  co_return http::json_response(501, {{"code", "unimplemented"},
                                      {"message", "filesystem.Filesystem/" + method +
                                                      " is not served by Sandfort's E2B-compatible API yet"}});
}

// POST /filesystem.Filesystem/{method} (unary: a JSON body, a JSON answer).
awaitable<http::response> filesystem_rpc(dependencies& deps, http::context& ctx, const auth::principal&) {
  auto call = authorize(deps, ctx.req);
  if (!call) co_return refuse_call(call.err(), ctx.request_id);
  if (call->port == interpreter_port) co_return interpreter_not_served();
  auto message = json::parse(ctx.req.body().empty() ? std::string("{}") : ctx.req.body(), nullptr, false);
  if (!message.is_object())
    co_return connect_error(make_error(errc::invalid_argument, "the message is not a JSON object"), ctx.request_id);
  const auto who = token_actor(*call, ctx.request_id, ctx.remote);
  co_return co_await answer_rpc(deps, *call, ctx.params["method"], message, who, ctx.request_id);
}

// GET /files?path=: the file's bytes as the agent streams them (never whole in memory).
awaitable<bool> download(dependencies& deps, http::exchange& ex, api::stream_call& sc) {
  auto call = authorize(deps, ex.parser.get());
  if (!call) {
    sc.answered(call.err());
    co_return co_await http::respond(ex, refuse_call(call.err(), ex.request_id));
  }
  auto path = ex.query.find("path");
  if (path == ex.query.end() || path->second.empty())
    co_return co_await http::respond(ex, connect_error(make_error(errc::invalid_argument, "path is required"),
                                                       ex.request_id));
  auto agent = co_await deps.commands.connect_agent(call->org_id, call->sandbox_id,
                                                    token_actor(*call, ex.request_id, ex.remote), nullptr);
  if (!agent) co_return co_await http::respond(ex, connect_error(agent.err(), ex.request_id));
  // The sandbox plane's credential and the SDK's user stay here: the agent gets the path alone.
  auto& h = ex.parser.get();
  h.erase("X-Access-Token");
  h.erase(http::bhttp::field::authorization);
  http::forward_options target{"/files?path=" + query_escape(path->second)};
  target.answer_timeout = std::chrono::seconds(deps.cfg.agent_idle_timeout_s);
  target.idle_timeout = std::chrono::seconds(deps.cfg.agent_idle_timeout_s);
  co_return co_await api::forward_over(deps, *agent, ex, std::move(target));
}

}  // namespace

// One request to the sandbox's agent (over a kept connection or a new one), its answer bounded in size and time.
// `raw`, when given, is the body as it is (a file's bytes) instead of `body`'s JSON.
awaitable<result<agent_answer>> call_agent(dependencies& deps, const sandbox_call& call, http::verb method,
                                           std::string target, const json* body, const audit::actor& who,
                                           const std::string_view* raw) {
  // An action (not a read) is recorded in the audit chain before it happens, as on the native API.
  const audit::record note{api::forwarded_action(method, target), "", "accepted",
                           json{{"method", std::string(http::bhttp::to_string(method))},
                                {"path", target.substr(0, 1024)}, {"via", "e2b"}}};
  const bool acts = method != http::verb::get;
  auto agent = co_await deps.commands.connect_agent(call.org_id, call.sandbox_id, who, acts ? &note : nullptr);
  if (!agent) co_return agent.err();
  http::request req = http::make_request(method, std::move(target), body);
  if (raw) {
    req.body() = std::string(*raw);
    req.set(http::bhttp::field::content_type, "application/octet-stream");
  }
  req.set(http::bhttp::field::host, "agent");
  req.prepare_payload();
  agent->stream.lowest().expires_after(agent_call_timeout);
  auto [wec, wn] = co_await beast::http::async_write(agent->stream, req, asio::as_tuple(asio::use_awaitable));
  (void)wn;
  if (wec) co_return make_error(errc::unavailable, "the sandbox's agent did not take the request: " + wec.message());
  beast::flat_buffer buffer = http::bounded_read_buffer();
  beast::http::response_parser<beast::http::string_body> parser;
  parser.body_limit(max_agent_answer_bytes);
  auto [rec, rn] = co_await beast::http::async_read(agent->stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
  (void)rn;
  if (rec) co_return make_error(errc::unavailable, "the sandbox's agent did not answer: " + rec.message());
  agent_answer out{parser.get().result_int(), json::parse(parser.get().body(), nullptr, false)};
  co_return out;
}

std::vector<api::api_route> filesystem_routes() {
  // No API key: each handler authorizes the sandbox's access token first.
  api::api_route rpc{http::verb::post, "/e2b-sandbox/filesystem.Filesystem/{method}", std::nullopt, filesystem_rpc};
  rpc.dialect = sandbox_dialect();
  api::api_route files{http::verb::get, "/e2b-sandbox/files", std::nullopt, api::route_kind::forwarded, download};
  files.dialect = sandbox_dialect();
  return {std::move(rpc), std::move(files)};
}

}  // namespace sandfort::compat::e2b
