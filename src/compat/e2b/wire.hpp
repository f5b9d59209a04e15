#pragma once
// What the E2B tables share: the dialect (X-API-KEY, E2B's error bodies), the access tokens, and
// how a sandbox looks on E2B's wire.

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "routes.hpp"
#include "sandfort/compat/e2b/e2b.hpp"
#include "sandfort/http/stream.hpp"
#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/types.hpp"

namespace sandfort::compat::e2b {

namespace asio = boost::asio;
using asio::awaitable;
using api::dependencies;
using nlohmann::json;

// The envd version the sandboxes announce: what the SDK gates features on (docs/e2b.md).
inline constexpr const char* envd_version = "0.5.7";



// The control plane's: X-API-KEY, errors as {code: <HTTP status>, message}.
std::shared_ptr<const api::route_dialect> rest_dialect();
http::response rest_error(const error& e, const std::string& request_id);
// The sandbox plane's: Connect's {code: "not_found", message} with its HTTP status.
http::response connect_error(const error& e, const std::string& request_id);
std::shared_ptr<const api::route_dialect> sandbox_dialect();
// A server stream's refusal (process.Process/Start, Connect, WatchDir): Connect's clients read a
// stream's error from its end-of-stream message only (any other status is told by its HTTP
// code alone), so it is a 200 whose one envelope carries {"error": {code, message}}.
http::response stream_error(const error& e, const std::string& request_id);

// The daemon's token store (register_routes); null while the routes are only listed.
token_backend* tokens();
void set_tokens(token_backend* t);

// A fresh token, recorded hashed for the sandbox; the token itself is returned once.
result<std::string> mint_token(const std::string& sandbox_id);

// A sandbox as GET /sandboxes/{id} and the list answer it; `token` only in create/connect answers.
nlohmann::json sandbox_json(const sandbox::sandbox_view& v);
// The E2B state of a Sandfort state: running | paused (stopped, error and the rest: as named).
std::string e2b_state(const std::string& state);

inline constexpr const char* envd_port = "49983";
inline constexpr const char* interpreter_port = "49999";

// A sandbox plane request whose access token opened the sandbox it names.
struct sandbox_call {
  std::string org_id;
  std::string sandbox_id;
  std::string port;  // E2b-Sandbox-Port; envd's when absent
};
// The token is X-Access-Token; on port 49999 E2B-Traffic-Access-Token when that is absent (the
// code interpreter SDK sends only it on /contexts; create and connect answer the same token as
// trafficAccessToken). unauthenticated (401) for a missing or wrong token, or another sandbox's; for the token of a
// sandbox since deleted, gone (the SDK's "not running": a 502 answered by not_running()). Then
// the rate limits: a member key's bucket per sandbox token, and its organization's bucket (the
// one all its keys share), as the guard takes them on the native API.
result<sandbox_call> authorize(dependencies& deps, const http::bhttp::fields& h);
bool is_gone(const error& e);
http::response not_running(const std::string& why);
// The refusal of authorize() as the sandbox plane answers it.
http::response refuse_call(const error& e, const std::string& request_id);
// How the audit chain names a sandbox plane caller: the sandbox's token, not a key.
audit::actor token_actor(const sandbox_call& call, const std::string& request_id, const std::string& remote);
// An envd path asked of the code interpreter's door (port 49999), which serves only /execute,
// /contexts and /health (interpreter.cpp).
http::response interpreter_not_served();

// One request to the sandbox's agent over a connection of its own, its answer bounded in size
// (8 MiB) and time (30 s) (filesystem.cpp). `raw`, when given, is the body as it is.
struct agent_answer {
  unsigned status = 0;
  nlohmann::json body;
};
boost::asio::awaitable<result<agent_answer>> call_agent(api::dependencies& deps, const sandbox_call& call,
                                                        http::verb method, std::string target,
                                                        const nlohmann::json* body, const audit::actor& who,
                                                        const std::string_view* raw = nullptr);
// An agent's server-sent events turned into another wire's frames as they come: cut into whole
// events (one held at most `max_event_bytes` until its end is seen), each translated, the frames
// written to `out` (process.cpp: Connect envelopes; interpreter.cpp: E2B's JSON lines).
class event_translator : public sandbox::byte_sink {
 public:
  struct event {
    std::string name;  // `event:`
    std::string data;  // its `data:` lines, joined
  };
  event_translator(http::chunked_writer& out, std::size_t max_event_bytes) : out_(out), max_event_bytes_(max_event_bytes) {}
  // False: the client left, or an event outgrew its bound.
  boost::asio::awaitable<bool> write(std::string_view bytes) override;

 protected:
  // The frame for one event; empty: nothing to write for it.
  virtual std::string translate(const event& e) = 0;

 private:
  http::chunked_writer& out_;
  std::size_t max_event_bytes_;
  std::string pending_;
};

// An agent's answer body (its head read) into `sink`, in 16 KiB pieces, until its end or until
// the sink refuses a piece: ok; unavailable when the agent's stream breaks.
using agent_body_parser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;
boost::asio::awaitable<result<void>> relay_body(sandbox::agent_stream& stream, boost::beast::flat_buffer& buffer,
                                                agent_body_parser& parser, sandbox::byte_sink& sink);

// A query parameter's value, percent-encoded.
std::string query_escape(const std::string& value);

// The control plane's and the sandbox plane's tables (control_plane.cpp, sandbox_plane.cpp).
std::vector<api::api_route> control_routes();
std::vector<api::api_route> sandbox_plane_routes();
std::vector<api::api_route> process_routes();     // process.cpp
std::vector<api::api_route> filesystem_routes();  // filesystem.cpp
std::vector<api::api_route> interpreter_routes(); // interpreter.cpp: port 49999's /execute, /contexts
std::vector<api::api_route> transfer_routes();    // files_stream.cpp: POST /files, streamed

// The control plane's snapshots, fork, metrics and network (snapshots.cpp), in control_routes().
awaitable<http::response> create_snapshot(dependencies& deps, http::context& ctx, const auth::principal& p);
awaitable<http::response> list_snapshots(dependencies& deps, http::context& ctx, const auth::principal& p);
awaitable<http::response> delete_snapshot(dependencies& deps, http::context& ctx, const auth::principal& p);
awaitable<http::response> fork_sandbox(dependencies& deps, http::context& ctx, const auth::principal& p);
awaitable<http::response> get_metrics(dependencies& deps, http::context& ctx, const auth::principal& p);
awaitable<http::response> update_network(dependencies& deps, http::context& ctx, const auth::principal& p);

// A page of a list: its items, and X-Next-Token when there is more (empty: none).
http::response page_response(const nlohmann::json& items, const std::string& next_token);

// A control plane route: X-API-KEY, E2B's error bodies.
api::api_route rest_route(http::verb m, std::string pattern, auth::permission n, api::buffered_handler h);
// What E2B's create and network update ask of the egress (allow_internet_access, network) as the
// sandbox's allowlist (snapshots.cpp; docs/e2b.md, "Network"): nullopt when they ask nothing.
result<std::optional<std::vector<std::string>>> egress_of(const nlohmann::json& body);
// A sandbox as the create, connect and fork answers carry it: with a new access token.
result<nlohmann::json> with_new_token(const sandbox::sandbox_view& v);

// Connect's server streams (process.cpp): an envelope is the flags, the length big-endian and
// the JSON message; the last one has end_stream_flag and carries {} or {"error": …}.
inline constexpr std::uint8_t end_stream_flag = 0x02;
std::string envelope(std::uint8_t flags, const nlohmann::json& message);
nlohmann::json connect_error_json(const error& e);
// A server-streaming call begun: its token opened the sandbox, its one enveloped message (at
// most 1 MiB) read. nullopt once the refusal is answered; `keep` is then what to return.
struct stream_request {
  sandbox_call call;
  nlohmann::json message;
};
boost::asio::awaitable<std::optional<stream_request>> begin_stream(api::dependencies& deps, http::exchange& ex,
                                                                   api::stream_call& sc, bool& keep);
std::string shell_quote(const std::string& word);
// envd's ProcessConfig as the agent's start request: {command: "exec 'cmd' 'args'…", env, cwd}.
result<nlohmann::json> parse_start(const nlohmann::json& message);
// The pid a ProcessSelector names.
result<std::int64_t> selected_pid(const nlohmann::json& message);

// filesystem.Filesystem/WatchDir, a server stream over the agent's directory watch (watch.cpp).
std::vector<api::api_route> watch_routes();

// PTYs (pty.cpp): process.Process's Start with `pty`, and the calls that name a PTY's pid.
boost::asio::awaitable<bool> start_pty(api::dependencies& deps, http::exchange& ex, api::stream_call& sc,
                                       const sandbox_call& call, const nlohmann::json& message);
bool is_pty(const std::string& sandbox_id, std::int64_t pid);
boost::asio::awaitable<bool> connect_pty(http::exchange& ex, api::stream_call& sc, const sandbox_call& call,
                                         std::int64_t pid);
// Update (any pid), and SendInput, SendSignal, CloseStdin for a PTY's pid; nullopt for the others.
std::optional<http::response> pty_rpc(const sandbox_call& call, const std::string& method,
                                      const nlohmann::json& message, const std::string& request_id);
// The sandbox's PTYs as envd's ProcessInfo, appended to `processes`.
void list_ptys(const std::string& sandbox_id, nlohmann::json& processes);

}  // namespace sandfort::compat::e2b
