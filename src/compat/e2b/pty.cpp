// envd's PTYs (the SDK's pty.create, sendInput, resize, kill, and commands.connect to one) over
// the agent's PTY: GET /pty, a WebSocket with the terminal's bytes in binary frames both ways and
// resize and exit in text frames, the one the native /v1/sandboxes/{id}/pty forwards to.
// sandfortd holds that WebSocket itself: on E2B's wire a PTY outlives the Start stream that made
// it (the SDK's stream ends after 60 s, or on disconnect()), and SendInput, Update and SendSignal
// reach it by a pid this layer gives it (above any kernel pid, so never a command's). Output is
// fanned out, bytes exact, to the streams that follow the PTY; with none it is read and dropped
// (up to 1 MiB/s, beyond which the program waits on its terminal).
#include <cctype>
#include <chrono>
#include <deque>
#include <map>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>

#include "sandfort/core/base64.hpp"
#include "sandfort/http/proxy.hpp"
#include "wire.hpp"

namespace sandfort::compat::e2b {

namespace pty_wire {

namespace beast = boost::beast;

constexpr std::size_t max_ptys_per_sandbox = 16;
constexpr std::size_t max_ptys_total = 1024;
// Keystrokes queued for a terminal that does not read them.
constexpr std::size_t max_pty_input_queued = 1u << 20;
// Output queued for a follower: beyond the high-water mark the terminal waits for it (its
// program blocks on its writes); a follower that stays beyond it for 5 s is cut off, the others
// go on. The backlog is the hard bound (a high-water mark and one frame).
constexpr std::size_t pty_high_water = 1u << 20;
constexpr auto pty_stuck = std::chrono::seconds(5);
constexpr std::size_t max_pty_backlog = 4u << 20;
// The agent's query carries the command and its environment (its request header is bounded).
constexpr std::size_t max_pty_target = 6000;
constexpr unsigned max_pty_dimension = 1000;
constexpr std::int64_t first_pty_pid = 5'000'000;  // pid_max is at most 2^22
constexpr auto pty_keepalive = std::chrono::seconds(30);
// Output nobody follows is read and dropped at most this fast: beyond, the terminal waits (its
// program blocks on its writes) instead of a sandbox keeping sandfortd busy dropping it.
constexpr std::size_t max_unfollowed_bytes_per_s = 1u << 20;

struct pty_write {
  enum class kind { bytes, control };
  kind type = kind::bytes;
  std::string data;
};

// A stream that follows the PTY: its frames not yet written.
struct pty_follower {
  explicit pty_follower(const asio::any_io_executor& ex) : wake(ex) {}
  std::deque<std::string> frames;
  std::size_t bytes = 0;
  bool behind = false;
  asio::steady_timer wake;
};

struct pty_session {
  explicit pty_session(sandbox::agent_session a)
      : agent(std::move(a)), ws(agent.stream), drained(agent.stream.get_executor()) {}
  sandbox::agent_session agent;
  beast::websocket::stream<http::any_stream&> ws;  // over agent.stream
  std::string sandbox_id;
  std::int64_t pid = 0;
  json config;
  std::deque<pty_write> outbox;
  std::size_t queued = 0;
  bool writing = false;
  std::vector<std::shared_ptr<pty_follower>> followers;
  bool ended = false;
  bool killed = false;
  std::optional<int> exit_code;
  asio::steady_timer drained;  // the reader waits on it while a follower is beyond the high-water mark
};

// Every PTY of this daemon by (sandbox, pid); the daemon runs one I/O thread. Not an owner: its
// reader (and the streams following it) own a session, so what the I/O context holds when it is
// destroyed is all there is (no socket outlives it in a static).
std::map<std::pair<std::string, std::int64_t>, std::weak_ptr<pty_session>>& ptys() {
  static std::map<std::pair<std::string, std::int64_t>, std::weak_ptr<pty_session>> all;
  return all;
}
std::int64_t next_pty_pid = first_pty_pid;

std::shared_ptr<pty_session> find_pty(const std::string& sandbox_id, std::int64_t pid) {
  auto it = ptys().find({sandbox_id, pid});
  return it == ptys().end() ? nullptr : it->second.lock();
}

std::size_t ptys_of(const std::string& sandbox_id) {
  std::size_t n = 0;
  for (auto it = ptys().lower_bound({sandbox_id, 0}); it != ptys().end() && it->first.first == sandbox_id; ++it) ++n;
  return n;
}

std::string pty_data_frame(std::string_view bytes) {
  return envelope(0, json{{"event", json{{"data", json{{"pty", base64_encode(bytes)}}}}}});
}
std::string pty_start_frame(std::int64_t pid) { return envelope(0, json{{"event", json{{"start", json{{"pid", pid}}}}}}); }
std::string pty_keepalive_frame() { return envelope(0, json{{"event", json{{"keepalive", json::object()}}}}); }

// Whether a follower took the bytes.
bool publish(pty_session& s, std::string_view bytes) {
  std::string frame;
  for (auto& f : s.followers) {
    if (f->behind) continue;
    if (frame.empty()) frame = pty_data_frame(bytes);
    if (f->bytes + frame.size() > max_pty_backlog) {
      f->behind = true;
      f->frames.clear();
      f->bytes = 0;
    } else {
      f->frames.push_back(frame);
      f->bytes += frame.size();
    }
    f->wake.cancel();
  }
  return !frame.empty();
}

// A text frame of the agent: the exit ({"type":"exit","exit_code":N}); errors (a refused
// resize) are not E2B's to see.
void note_control(pty_session& s, const std::string& text) {
  const auto j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("type") || j["type"] != "exit") return;
  if (j.contains("exit_code") && j["exit_code"].is_number_integer()) s.exit_code = j["exit_code"].get<int>();
}

void end_session(pty_session& s) {
  s.ended = true;
  ptys().erase({s.sandbox_id, s.pid});
  s.outbox.clear();
  s.queued = 0;
  for (auto& f : s.followers) f->wake.cancel();
}

std::size_t fullest(const pty_session& s) {
  std::size_t most = 0;
  for (const auto& f : s.followers)
    if (!f->behind) most = std::max(most, f->bytes);
  return most;
}

// The followers still beyond the high-water mark after the wait: cut off.
void cut_stuck(pty_session& s) {
  for (auto& f : s.followers)
    if (!f->behind && f->bytes > pty_high_water) {
      f->behind = true;
      f->frames.clear();
      f->bytes = 0;
      f->wake.cancel();
    }
}

// The terminal's output and its exit, until the WebSocket ends.
awaitable<void> read_pty(std::shared_ptr<pty_session> s) {
  beast::flat_buffer frame;
  asio::steady_timer pause(s->ws.get_executor());
  std::size_t dropped = 0;
  auto window = std::chrono::steady_clock::now();
  for (;;) {
    if (dropped >= max_unfollowed_bytes_per_s) {
      pause.expires_at(window + std::chrono::seconds(1));
      auto [pec] = co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      (void)pec;
      dropped = 0;
    }
    if (std::chrono::steady_clock::now() - window >= std::chrono::seconds(1)) {
      window = std::chrono::steady_clock::now();
      dropped = 0;
    }
    auto [ec, n] = co_await s->ws.async_read(frame, asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (ec) break;
    const std::string bytes = beast::buffers_to_string(frame.data());
    frame.consume(frame.size());
    if (!s->ws.got_binary())
      note_control(*s, bytes);
    else if (!publish(*s, bytes))
      dropped += bytes.size();
    if (fullest(*s) <= pty_high_water) continue;
    const auto deadline = std::chrono::steady_clock::now() + pty_stuck;
    while (fullest(*s) > pty_high_water && !s->killed && std::chrono::steady_clock::now() < deadline) {
      s->drained.expires_at(deadline);
      auto [dec] = co_await s->drained.async_wait(asio::as_tuple(asio::use_awaitable));
      (void)dec;
    }
    cut_stuck(*s);
  }
  end_session(*s);
}

// The one writer of the WebSocket: keystrokes and resizes.
awaitable<void> write_pty(std::shared_ptr<pty_session> s) {
  while (!s->outbox.empty() && !s->ended) {
    pty_write w = std::move(s->outbox.front());
    s->outbox.pop_front();
    s->queued -= w.data.size();
    s->ws.binary(w.type == pty_write::kind::bytes);
    auto data = asio::buffer(w.data);
    auto [ec, n] = co_await s->ws.async_write(data, asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (ec) break;
  }
  s->writing = false;
}

void send_to_pty(const std::shared_ptr<pty_session>& s, pty_write w) {
  s->queued += w.data.size();
  s->outbox.push_back(std::move(w));
  if (s->writing) return;
  s->writing = true;
  asio::co_spawn(s->ws.get_executor(), write_pty(s), asio::detached);
}

bool env_name(const std::string& k) {
  if (k.empty() || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  for (char c : k)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

result<unsigned> dimension(const json& size, const char* key, unsigned fallback) {
  auto it = size.find(key);
  if (it == size.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > max_pty_dimension)
    return make_error(errc::invalid_argument, std::string("pty.size.") + key + " must be from 1 to 1000");
  return it->get<unsigned>();
}

struct pty_spec {
  std::string target;  // GET /pty?… on the agent
  json config;         // envd's ProcessConfig, for List
};

// envd's StartRequest {process: {cmd, args, envs, cwd}, pty: {size: {cols, rows}}}: the command
// run by the agent's shell with the environment exported first.
result<pty_spec> parse_pty(const json& message) {
  auto start = parse_start(message);
  if (!start) return start.err();
  std::string command;
  if (auto env = start->find("env"); env != start->end())
    for (const auto& [k, v] : env->items()) {
      if (!env_name(k)) return make_error(errc::invalid_argument, "envs: '" + k.substr(0, 100) + "' is not a variable name");
      command += "export " + k + "=" + shell_quote(v.get<std::string>()) + "; ";
    }
  command += start->value("command", std::string());
  const json pty = message.value("pty", json::object());
  const json size = pty.is_object() && pty.contains("size") && pty["size"].is_object() ? pty["size"] : json::object();
  auto cols = dimension(size, "cols", 80);
  if (!cols) return cols.err();
  auto rows = dimension(size, "rows", 24);
  if (!rows) return rows.err();
  pty_spec spec;
  spec.target = "/pty?cols=" + std::to_string(*cols) + "&rows=" + std::to_string(*rows) +
                "&command=" + query_escape(command);
  if (start->contains("cwd")) spec.target += "&cwd=" + query_escape((*start)["cwd"].get<std::string>());
  if (spec.target.size() > max_pty_target)
    return make_error(errc::invalid_argument, "the PTY's command, environment and cwd are too long (6000 bytes)");
  const json process = message.value("process", json::object());
  spec.config = json::object();
  for (const char* key : {"cmd", "args", "envs", "cwd"})
    if (process.is_object() && process.contains(key)) spec.config[key] = process[key];
  return spec;
}

audit::record pty_note() {
  return audit::record{api::forwarded_action(http::verb::get, "/pty"), "", "accepted",
                       json{{"method", "GET"}, {"path", "/pty"}, {"via", "e2b"}}};
}

// The agent's refusal of the upgrade (a missing cwd is its 400).
error pty_refusal(const beast::websocket::response_type& res, const boost::system::error_code& ec) {
  const unsigned status = res.result_int();
  if (status < 400) return make_error(errc::unavailable, "the sandbox's agent did not open a terminal: " + ec.message());
  const auto j = json::parse(res.body(), nullptr, false);
  std::string message = "the sandbox's agent refused the terminal (" + std::to_string(status) + ")";
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string())
    message = j["error"]["message"].get<std::string>();
  return make_error(status == 404 ? errc::not_found : status == 429 ? errc::quota_exceeded : errc::invalid_argument,
                    message);
}

error too_many_ptys(const std::string& sandbox_id) {
  if (ptys().size() >= max_ptys_total)
    return make_error(errc::quota_exceeded, "this server holds " + std::to_string(max_ptys_total) + " PTYs: kill one first");
  return make_error(errc::quota_exceeded, "this sandbox has " + std::to_string(ptys_of(sandbox_id)) +
                                              " PTYs, the most it may hold: kill one first");
}

bool room_for_pty(const std::string& sandbox_id) {
  return ptys().size() < max_ptys_total && ptys_of(sandbox_id) < max_ptys_per_sandbox;
}

// A new terminal in the sandbox, its WebSocket held here and read from now on.
awaitable<result<std::shared_ptr<pty_session>>> open_pty(dependencies& deps, const sandbox_call& call,
                                                         const json& message, const audit::actor& who) {
  auto spec = parse_pty(message);
  if (!spec) co_return spec.err();
  if (!room_for_pty(call.sandbox_id)) co_return too_many_ptys(call.sandbox_id);
  const audit::record note = pty_note();
  auto agent = co_await deps.commands.connect_agent(call.org_id, call.sandbox_id, who, &note);
  if (!agent) co_return agent.err();
  auto s = std::make_shared<pty_session>(std::move(*agent));
  s->ws.set_option(beast::websocket::stream_base::timeout::suggested(beast::role_type::client));
  s->ws.read_message_max(1u << 20);
  s->ws.auto_fragment(false);
  beast::websocket::response_type res;
  auto [ec] = co_await s->ws.async_handshake(res, "agent", spec->target, asio::as_tuple(asio::use_awaitable));
  if (ec) co_return pty_refusal(res, ec);
  if (!room_for_pty(call.sandbox_id)) co_return too_many_ptys(call.sandbox_id);  // others opened meanwhile
  s->sandbox_id = call.sandbox_id;
  s->pid = next_pty_pid++;
  s->config = std::move(spec->config);
  ptys()[{s->sandbox_id, s->pid}] = s;
  asio::co_spawn(s->ws.get_executor(), read_pty(s), asio::detached);
  co_return s;
}

// The end event and the trailer of a follower's stream.
std::pair<std::string, std::string> pty_closing(const pty_session& s, const pty_follower& f) {
  json trailer = json::object();
  std::string end;
  if (f.behind) {
    trailer["error"] = connect_error_json(make_error(
        errc::quota_exceeded, "this stream fell behind the terminal's output (1 MiB unread for 5 s): connect to the "
                              "PTY again"));
  } else if (s.exit_code) {
    end = envelope(0, json{{"event", json{{"end", json{{"exitCode", *s.exit_code},
                                                       {"exited", true},
                                                       {"status", "exit status " + std::to_string(*s.exit_code)}}}}}});
  } else if (s.killed) {
    end = envelope(0, json{{"event", json{{"end", json{{"exitCode", -1}, {"exited", false}, {"status", "signal: killed"}}}}}});
  } else {
    trailer["error"] = connect_error_json(make_error(errc::unavailable, "the terminal's connection to the sandbox ended"));
  }
  return {end, envelope(end_stream_flag, trailer)};
}

// Writes what the follower is given until the PTY ends or the follower falls behind; false
// once the client is gone.
awaitable<bool> pump_pty(pty_session& s, pty_follower& f, http::chunked_writer& out) {
  for (;;) {
    while (!f.frames.empty()) {
      const std::string frame = std::move(f.frames.front());
      f.frames.pop_front();
      f.bytes -= frame.size();
      s.drained.cancel();
      if (!co_await out.write(frame)) co_return false;
    }
    if (f.behind || s.ended) co_return true;
    f.wake.expires_after(pty_keepalive);
    auto [ec] = co_await f.wake.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) continue;  // woken
    const std::string keepalive = pty_keepalive_frame();
    if (!co_await out.write(keepalive)) co_return false;
  }
}

// A Start's or Connect's stream: the start event, the output, the end.
awaitable<bool> follow_pty(http::exchange& ex, std::shared_ptr<pty_session> s) {
  http::chunked_writer out(ex);
  if (!co_await out.start(200, "application/connect+json")) co_return false;
  const std::string start = pty_start_frame(s->pid);
  if (!co_await out.write(start)) co_return false;
  auto f = std::make_shared<pty_follower>(ex.stream.get_executor());
  s->followers.push_back(f);
  using namespace asio::experimental::awaitable_operators;
  auto first = co_await (pump_pty(*s, *f, out) || http::until_client_leaves(ex));
  std::erase(s->followers, f);
  s->drained.cancel();
  if (first.index() == 1 || !std::get<0>(first)) co_return false;
  auto [end, trailer] = pty_closing(*s, *f);
  if (!end.empty() && !co_await out.write(end)) co_return false;
  if (!co_await out.write(trailer)) co_return false;
  co_return co_await out.finish();
}

http::response pty_ok() { return http::json_response(200, json::object()); }

}  // namespace pty_wire

awaitable<bool> start_pty(dependencies& deps, http::exchange& ex, api::stream_call& sc, const sandbox_call& call,
                          const json& message) {
  auto s = co_await pty_wire::open_pty(deps, call, message, token_actor(call, ex.request_id, ex.remote));
  if (!s) {
    sc.answered(s.err());
    co_return co_await http::respond(ex, stream_error(s.err(), ex.request_id));
  }
  sc.answered(200u);
  co_return co_await pty_wire::follow_pty(ex, std::move(*s));
}

bool is_pty(const std::string& sandbox_id, std::int64_t pid) { return pty_wire::find_pty(sandbox_id, pid) != nullptr; }

awaitable<bool> connect_pty(http::exchange& ex, api::stream_call& sc, const sandbox_call& call, std::int64_t pid) {
  auto s = pty_wire::find_pty(call.sandbox_id, pid);
  if (!s) {
    const auto gone = make_error(errc::not_found, "process with pid " + std::to_string(pid) + " not found");
    sc.answered(gone);
    co_return co_await http::respond(ex, stream_error(gone, ex.request_id));
  }
  sc.answered(200u);
  co_return co_await pty_wire::follow_pty(ex, std::move(s));
}

std::optional<http::response> pty_rpc(const sandbox_call& call, const std::string& method, const json& message,
                                      const std::string& request_id) {
  using namespace pty_wire;
  if (method != "Update" && method != "SendInput" && method != "SendSignal" && method != "CloseStdin") return std::nullopt;
  auto pid = selected_pid(message);
  auto s = pid ? find_pty(call.sandbox_id, *pid) : nullptr;
  if (!s || s->killed) {
    if (method != "Update") return std::nullopt;  // a command's (process.cpp), or not found there
    if (!pid) return connect_error(pid.err(), request_id);
    return connect_error(make_error(errc::not_found, "no PTY with pid " + std::to_string(*pid) + " in this sandbox"),
                         request_id);
  }
  if (method == "SendSignal") {
    // SIGKILL and SIGTERM alike: the connection goes, so the agent hangs the terminal up and kills
    // what is left 2 s later. Not a close frame: it would queue behind keystrokes a program that
    // reads none holds up.
    s->killed = true;
    s->drained.cancel();
    boost::system::error_code ignored;
    s->agent.stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
    return pty_ok();
  }
  if (method == "CloseStdin")
    return connect_error(make_error(errc::invalid_argument, "a PTY has no stdin to close: send EOF (Ctrl-D, \\x04) as input"),
                         request_id);
  if (method == "Update") {
    const json pty = message.contains("pty") && message["pty"].is_object() ? message["pty"] : json::object();
    if (!pty.contains("size") || !pty["size"].is_object()) return pty_ok();
    auto cols = dimension(pty["size"], "cols", 0);
    auto rows = dimension(pty["size"], "rows", 0);
    if (!cols || !rows || !*cols || !*rows)
      return connect_error(make_error(errc::invalid_argument, "pty.size needs cols and rows from 1 to 1000"), request_id);
    send_to_pty(s, pty_write{pty_write::kind::control, json{{"type", "resize"}, {"cols", *cols}, {"rows", *rows}}.dump()});
    return pty_ok();
  }
  const json input = message.contains("input") && message["input"].is_object() ? message["input"] : json::object();
  const std::string encoded = input.contains("pty") && input["pty"].is_string()       ? input["pty"].get<std::string>()
                              : input.contains("stdin") && input["stdin"].is_string() ? input["stdin"].get<std::string>()
                                                                                      : std::string();
  auto bytes = base64_decode(encoded);
  if (!bytes) return connect_error(make_error(errc::invalid_argument, "input.pty must be base64"), request_id);
  if (s->queued + bytes->size() > max_pty_input_queued)
    return connect_error(make_error(errc::quota_exceeded, "the terminal is not reading its input (1 MiB queued)"),
                         request_id);
  if (!bytes->empty()) send_to_pty(s, pty_write{pty_write::kind::bytes, std::move(*bytes)});
  return pty_ok();
}

void list_ptys(const std::string& sandbox_id, json& processes) {
  using namespace pty_wire;
  for (auto it = ptys().lower_bound({sandbox_id, 0}); it != ptys().end() && it->first.first == sandbox_id; ++it)
    if (auto s = it->second.lock(); s && !s->killed) processes.push_back(json{{"pid", s->pid}, {"config", s->config}});
}

}  // namespace sandfort::compat::e2b
