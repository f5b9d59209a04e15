// envd's process.Process over Connect (JSON, enveloped server streams), through the command
// backend the native exec routes use: Start runs the command as a streamed exec and relays its
// output as it is produced. What needs a process that outlives its request (List, Connect,
// SendInput, SendSignal, CloseStdin, Update) is not served yet: Connect's unimplemented.
#include <atomic>
#include <chrono>

#include "sandfort/core/base64.hpp"
#include "wire.hpp"

namespace sandfort::compat::e2b {

namespace asio = boost::asio;
using asio::awaitable;
using api::dependencies;
using nlohmann::json;

namespace {

// A Start request: the command and its options, one JSON message (Connect's limit for it).
constexpr std::size_t max_request_bytes = 1u << 20;
// One event of the agent's stream, as it is held until its end is seen.
constexpr std::size_t max_event_bytes = 4u << 20;

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
constexpr std::uint8_t end_stream = 0x02;

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

result<sandbox::exec_request> parse_start(const json& message, std::int64_t timeout_s) {
  const json& process = message.value("process", json::object());
  if (!process.is_object() || !process.contains("cmd") || !process["cmd"].is_string())
    return make_error(errc::invalid_argument, "process.cmd is required");
  sandbox::exec_request req;
  req.argv.push_back(process["cmd"].get<std::string>());
  if (auto args = process.find("args"); args != process.end()) {
    if (!args->is_array()) return make_error(errc::invalid_argument, "process.args must be a list of strings");
    for (const auto& a : *args) {
      if (!a.is_string()) return make_error(errc::invalid_argument, "process.args must be a list of strings");
      req.argv.push_back(a.get<std::string>());
    }
  }
  if (auto envs = process.find("envs"); envs != process.end() && envs->is_object())
    for (const auto& [k, v] : envs->items())
      if (v.is_string()) req.env[k] = v.get<std::string>();
  if (auto cwd = process.find("cwd"); cwd != process.end() && cwd->is_string()) req.cwd = cwd->get<std::string>();
  req.binary = true;  // the bytes as produced: Connect carries them base64
  req.timeout_s = timeout_s;
  return req;
}

// Connect-Timeout-Ms, in whole seconds (up to the daemon's longest exec); absent: the longest.
std::int64_t timeout_of(const http::bhttp::fields& h, std::int64_t longest) {
  auto it = h.find("Connect-Timeout-Ms");
  if (it == h.end()) return longest;
  std::int64_t ms = 0;
  for (char c : it->value()) {
    if (c < '0' || c > '9' || ms > 1'000'000'000'000) return longest;
    ms = ms * 10 + (c - '0');
  }
  return std::clamp<std::int64_t>((ms + 999) / 1000, 1, longest);
}

// The agent's server-sent events (stdout, stderr, exit, error) as envd's process events. The
// frames are made apart from the coroutines (GCC 12 miscompiles braced JSON inside them).
class envelope_sink final : public sandbox::byte_sink {
 public:
  explicit envelope_sink(http::chunked_writer& out) : out_(out) {}

  awaitable<bool> write(std::string_view bytes) override {
    pending_.append(bytes);
    for (auto end = pending_.find("\n\n"); end != std::string::npos; end = pending_.find("\n\n")) {
      std::string frame = translate(pending_.substr(0, end));
      pending_.erase(0, end + 2);
      if (frame.empty()) continue;
      if (!co_await out_.write(frame)) co_return false;
    }
    co_return pending_.size() <= max_event_bytes;
  }

  std::optional<json> outcome;  // the exit event's summary, or an error event's error
  bool failed = false;

 private:
  // The envelope for one output event; empty for the others (noted in outcome).
  std::string translate(const std::string& event) {
    std::string name, data;
    std::size_t start = 0;
    while (start < event.size()) {
      auto nl = std::min(event.find('\n', start), event.size());
      std::string_view line(event.data() + start, nl - start);
      if (line.starts_with("event: ")) name = line.substr(7);
      if (line.starts_with("data: ")) data.append(line.substr(6));
      start = nl + 1;
    }
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

  http::chunked_writer& out_;
  std::string pending_;
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
  return {end_frame, envelope(end_stream, trailer)};
}

std::atomic<std::int64_t> next_pid{1000};

// POST /process.Process/Start: a start event at once, output as produced, then the end event.
awaitable<bool> start_process(dependencies& deps, http::exchange& ex, api::stream_call& sc) {
  auto call = authorize(ex.parser.get());
  if (!call) {
    sc.answered(call.err());
    co_return co_await http::respond(ex, refuse_call(call.err(), ex.request_id));
  }
  if (call->port == interpreter_port) co_return co_await http::respond(ex, interpreter_not_served());
  auto body = co_await http::read_small_body(ex, max_request_bytes);
  if (!body) co_return co_await http::respond(ex, connect_error(body.err(), ex.request_id));
  auto message = read_enveloped(*body);
  if (!message) co_return co_await http::respond(ex, connect_error(message.err(), ex.request_id));
  auto req = parse_start(*message, timeout_of(ex.parser.get(), deps.cfg.exec_max_timeout_s));
  if (!req) co_return co_await http::respond(ex, connect_error(req.err(), ex.request_id));

  http::chunked_writer out(ex);
  sc.answered(200u);
  if (!co_await out.start(200, "application/connect+json")) co_return false;
  if (!co_await out.write(start_frame(next_pid++))) co_return false;
  envelope_sink sink(out);
  auto ran = co_await deps.commands.exec_stream(call->org_id, call->sandbox_id, std::move(*req), sink,
                                                token_actor(*call, ex.request_id, ex.remote));
  auto [end_frame, trailer] = closing_frames(ran, sink);
  if (!end_frame.empty() && !co_await out.write(end_frame)) co_return false;
  if (!co_await out.write(trailer)) co_return false;
  co_return co_await out.finish();
}

}  // namespace

std::vector<api::api_route> process_routes() {
  // No API key: the handler authorizes the sandbox's access token first.
  api::api_route r{http::verb::post, "/e2b-sandbox/process.Process/Start", std::nullopt, api::route_kind::streamed,
                   start_process};
  r.dialect = sandbox_dialect();
  return {std::move(r)};
}

}  // namespace sandfort::compat::e2b
