// Commands in a running sandbox, through its agent (commands.hpp).
#include "sandfort/sandbox/commands.hpp"

#include "sandfort/metrics/catalog.hpp"
#include "sandfort/sandbox/service.hpp"  // agent_address_of

#include <algorithm>
#include <optional>
#include <string_view>

namespace sandfort::sandbox {

namespace {

// Commands are recorded as given, cut at a length that keeps an event small; environment
// variables by name only (values are where secrets go).
constexpr std::size_t recorded_text = 1024;

// The largest length up to `at` (< s.size()) that ends at a UTF-8 character boundary.
std::size_t char_boundary(std::string_view s, std::size_t at) {
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
  return at;
}

// At a character boundary: never in the middle of a UTF-8 sequence.
std::string cut(const std::string& s) {
  if (s.size() <= recorded_text) return s;
  return s.substr(0, char_boundary(s, recorded_text)) + "…";
}

nlohmann::json env_names(const std::map<std::string, std::string>& env) {
  auto names = nlohmann::json::array();
  for (const auto& [k, v] : env) names.push_back(k);
  return names;
}

audit::record exec_note(const exec_request& req) {
  nlohmann::json details = {{"env", env_names(req.env)}};
  if (!req.command.empty()) {
    details["command"] = cut(req.command);
  } else {
    auto argv = nlohmann::json::array();
    for (const auto& a : req.argv) argv.push_back(cut(a));
    details["argv"] = argv;
  }
  if (!req.cwd.empty()) details["cwd"] = req.cwd;
  return {"sandbox.exec", "", "accepted", std::move(details)};
}

audit::record code_run_note(const code_run_request& req) {
  return {"sandbox.code_run", "", "accepted",
          {{"language", req.language}, {"code", cut(req.code)}, {"env", env_names(req.env)}}};
}

// A timeout above exec_max_timeout_s is refused, not shortened: a caller who asked for an hour
// must not believe a command that was killed after a minute simply failed.
std::optional<error> above_max_timeout(const exec_request& req, int max_s) {
  if (!req.timeout_s || *req.timeout_s <= max_s) return std::nullopt;
  return make_error(errc::invalid_argument, "timeout_s " + std::to_string(*req.timeout_s) +
                                                " is above this server's maximum of " + std::to_string(max_s) +
                                                " s (exec_max_timeout_s)");
}

// The refused request, as the chain records it: the exec event, denied, with the limit.
audit::record refusal(audit::record note, std::int64_t asked, int max_s) {
  note.outcome = "denied";
  note.details["guardrail"] = "exec_max_timeout_s";
  note.details["timeout_s"] = asked;
  note.details["max_timeout_s"] = max_s;
  return note;
}

// The agent is untrusted: whatever it answers, no stream's output exceeds the cap (counted in
// bytes of the text sent; the base64 form, when asked for, is held to the same number of raw bytes).
void hold_to_cap(std::string& text, std::optional<std::string>& b64, std::uint64_t cap, bool& truncated) {
  if (text.size() > cap) {
    text.resize(char_boundary(text, static_cast<std::size_t>(cap)));
    truncated = true;
  }
  const std::uint64_t whole_groups = cap / 3 * 4;
  if (b64 && b64->size() > (cap + 2) / 3 * 4) {
    b64->resize(static_cast<std::size_t>(whole_groups));
    truncated = true;
  }
}

void hold_to_cap(exec_result& r, std::uint64_t cap) {
  hold_to_cap(r.stdout_text, r.stdout_b64, cap, r.truncated);
  hold_to_cap(r.stderr_text, r.stderr_b64, cap, r.truncated);
}

// The same for streamed output. The agent's events are `event: stdout|stderr` with `data:
// {"data": text, "data_b64"?: …}`, then one `exit` (or `error`). Each output event is relayed
// rebuilt from its text (so its size follows from the text's), output beyond the cap per stream
// is cut (the exit event then says truncated), and anything else is dropped: whatever the agent
// sends, the caller gets at most the cap per stream and one final event.
class capped_events final : public byte_sink {
 public:
  capped_events(byte_sink& out, std::uint64_t cap) : out_(out), cap_(cap) {}

  boost::asio::awaitable<bool> write(std::string_view bytes) override {
    pending_.append(bytes);
    std::size_t start = 0;
    for (auto end = pending_.find("\n\n"); end != std::string::npos; end = pending_.find("\n\n", start)) {
      bool relayed = co_await relay(std::string_view(pending_).substr(start, end + 2 - start));
      if (!relayed) co_return false;
      start = end + 2;
    }
    pending_.erase(0, start);
    co_return pending_.size() <= max_event_bytes;
  }

 private:
  // A whole event of the agent's: more is not the agent (its largest is a 64 KiB chunk, escaped).
  static constexpr std::size_t max_event_bytes = 4u << 20;

  boost::asio::awaitable<bool> relay(std::string_view event) {
    auto newline = event.find('\n');
    std::string_view name = event.substr(0, newline);
    if (finished_ || !name.starts_with("event: ")) co_return true;
    name.remove_prefix(7);
    if (name == "exit" || name == "error") {
      finished_ = true;
      if (name == "error" || !cut_) co_return co_await out_.write(event);
    } else if (name != "stdout" && name != "stderr") {
      co_return true;
    }
    auto j = nlohmann::json::parse(data_of(event.substr(newline + 1)), nullptr, false);
    if (name == "exit") {
      if (j.is_object()) j["truncated"] = true;
      co_return co_await out_.write(frame(name, j));
    }
    if (!j.is_object() || !j.contains("data") || !j["data"].is_string()) co_return true;
    co_return co_await relay_output(name, name == "stdout" ? 0 : 1, j);
  }

  boost::asio::awaitable<bool> relay_output(std::string_view name, int stream, nlohmann::json& j) {
    std::string text = std::move(j["data"].get_ref<std::string&>());
    std::optional<std::string> b64;
    if (j.contains("data_b64") && j["data_b64"].is_string()) b64 = std::move(j["data_b64"].get_ref<std::string&>());
    const std::uint64_t room = cap_ - sent_[stream];
    if (text.size() > room) cut_ = true;
    bool ignored = false;
    hold_to_cap(text, b64, std::min<std::uint64_t>(room, text.size()), ignored);
    if (text.empty()) co_return true;
    sent_[stream] += text.size();
    nlohmann::json chunk = {{"data", std::move(text)}};
    if (b64) chunk["data_b64"] = std::move(*b64);
    co_return co_await out_.write(frame(name, chunk));
  }

  // The event's data lines, joined as SSE joins them.
  static std::string data_of(std::string_view lines) {
    std::string data;
    for (std::size_t at = 0; at < lines.size();) {
      auto end = std::min(lines.find('\n', at), lines.size());
      std::string_view line = lines.substr(at, end - at);
      if (line.starts_with("data: ")) data.append(data.empty() ? "" : "\n").append(line.substr(6));
      at = end + 1;
    }
    return data;
  }

  static std::string frame(std::string_view name, const nlohmann::json& j) {
    std::string out = "event: ";
    out.append(name).append("\ndata: ");
    out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return out + "\n\n";
  }

  byte_sink& out_;
  std::uint64_t cap_;
  std::string pending_;
  std::uint64_t sent_[2] = {0, 0};
  bool cut_ = false;
  bool finished_ = false;
};

}  // namespace

result<store::sandbox_record> find_started(store::database& db, activity_tracker& activity, const std::string& org_id,
                                           const std::string& id_or_name) {
  auto rec = db.get_sandbox(org_id, id_or_name);
  if (!rec) return rec;
  if (rec->state == "paused")
    return make_error(errc::conflict, "sandbox " + rec->id + " is paused; resume it first");
  if (rec->state != "started")
    return make_error(errc::conflict, "sandbox " + rec->id + " is " + rec->state + "; it must be started for this call");
  activity.touch(rec->id);  // every call that needs it started is use (the idle timeout)
  return rec;
}

command_service::command_service(const config& cfg, store::database& db, agent_connector& agent,
                                 activity_tracker& activity, const clock& clk, unreachable_agent explain)
    : cfg_(cfg), db_(db), agent_(agent), activity_(activity), journal_(db, clk), explain_(std::move(explain)) {}

result<agent_exec> command_service::prepare_exec(exec_request req) const {
  if (req.argv.empty() == req.command.empty())
    return make_error(errc::invalid_argument, "give exactly one of command (a shell command line) or argv");
  std::int64_t timeout_s = req.timeout_s.value_or(cfg_.exec_default_timeout_s);
  if (timeout_s <= 0 || timeout_s > cfg_.exec_max_timeout_s)
    return make_error(errc::invalid_argument, "timeout_s must be between 1 and " + std::to_string(cfg_.exec_max_timeout_s));
  for (const auto& [k, v] : req.env)
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos)
      return make_error(errc::invalid_argument, "env name '" + k + "' is not a valid variable name");
  return agent_exec{std::move(req), std::chrono::seconds(timeout_s), cfg_.output_cap_bytes};
}

result<void> command_service::note_action(const store::sandbox_record& rec, const audit::actor& who, audit::record note) {
  note.target = rec.id;
  auto e = journal_.record_event(rec.org_id, who, note);
  if (!e) return std::move(e).err();
  return {};
}

task<exec_result> command_service::exec_noted(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                      const audit::actor& who, audit::record note) {
  if (auto over = above_max_timeout(req, cfg_.exec_max_timeout_s)) {
    auto rec = db_.get_sandbox(org_id, id_or_name);
    if (!rec) co_return std::move(rec).err();
    auto noted = note_action(*rec, who, refusal(std::move(note), *req.timeout_s, cfg_.exec_max_timeout_s));
    co_return noted ? std::move(*over) : std::move(noted).err();
  }
  auto call = prepare_exec(std::move(req));
  if (!call) co_return std::move(call).err();
  auto rec = find_started(db_, activity_, org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  note.details["timeout_s"] = std::chrono::duration_cast<std::chrono::seconds>(call->timeout).count();
  if (auto noted = note_action(*rec, who, std::move(note)); !noted) co_return std::move(noted).err();
  const auto busy = activity_.busy(rec->id);  // a command running is use, however long (idle timeout)
  // Timed from the request to the agent to its last byte (sandfort_exec_duration_seconds);
  // refusals before the agent is asked (bad input, not started) are not commands.
  metrics::timer timed(metrics::exec_duration(), {"whole", "error"});
  auto r = co_await agent_.exec(agent_address_of(*rec), *call);
  if (r) timed.values()[1] = "ok";
  timed.stop();
  if (r) hold_to_cap(*r, call->max_output_bytes);
  if (r || r.err().code != errc::unavailable) co_return r;
  co_return co_await explain_(*rec, std::move(r).err());
}

task<void> command_service::exec_stream_noted(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                      byte_sink& sink, const audit::actor& who, audit::record note) {
  if (auto over = above_max_timeout(req, cfg_.exec_max_timeout_s)) {
    auto rec = db_.get_sandbox(org_id, id_or_name);
    if (!rec) co_return std::move(rec).err();
    auto noted = note_action(*rec, who, refusal(std::move(note), *req.timeout_s, cfg_.exec_max_timeout_s));
    co_return noted ? std::move(*over) : std::move(noted).err();
  }
  auto call = prepare_exec(std::move(req));
  if (!call) co_return std::move(call).err();
  auto rec = find_started(db_, activity_, org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  note.details["timeout_s"] = std::chrono::duration_cast<std::chrono::seconds>(call->timeout).count();
  if (auto noted = note_action(*rec, who, std::move(note)); !noted) co_return std::move(noted).err();
  const auto busy = activity_.busy(rec->id);  // a command running is use, however long (idle timeout)
  capped_events capped(sink, call->max_output_bytes);
  // The reader's departure reaches the connector through the wrapper.
  sink.abandon = [&capped] {
    if (capped.abandon) capped.abandon();
  };
  struct unlink {
    byte_sink& s;
    ~unlink() { s.abandon = nullptr; }
  } on_exit{sink};
  metrics::timer timed(metrics::exec_duration(), {"stream", "error"});
  auto r = co_await agent_.exec_stream(agent_address_of(*rec), *call, capped);
  if (r) timed.values()[1] = "ok";
  timed.stop();
  if (r || r.err().code != errc::unavailable) co_return r;
  co_return co_await explain_(*rec, std::move(r).err());
}

task<exec_result> command_service::exec(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                const audit::actor& who) {
  auto note = exec_note(req);
  co_return co_await exec_noted(org_id, id_or_name, std::move(req), who, std::move(note));
}

task<void> command_service::exec_stream(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                byte_sink& sink, const audit::actor& who) {
  auto note = exec_note(req);
  co_return co_await exec_stream_noted(org_id, id_or_name, std::move(req), sink, who, std::move(note));
}

task<agent_session> command_service::connect_agent(const std::string& org_id, const std::string& id_or_name,
                                           const audit::actor& who, const audit::record* note) {
  auto rec = find_started(db_, activity_, org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (note)
    if (auto noted = note_action(*rec, who, *note); !noted) co_return std::move(noted).err();
  auto stream = co_await agent_.connect(agent_address_of(*rec));
  if (!stream) co_return std::move(stream).err();
  co_return agent_session{std::move(*stream), activity_.busy(rec->id)};
}

namespace {

result<exec_request> code_to_exec(const code_run_request& req) {
  exec_request run;
  if (req.language == "python")
    run.argv = {"python3", "-c", req.code};
  else if (req.language == "node")
    run.argv = {"node", "-e", req.code};
  else if (req.language == "bash" || req.language == "sh")
    run.argv = {req.language, "-c", req.code, req.language};  // the last one is $0
  else
    return make_error(errc::invalid_argument, "language must be one of python, node, bash, sh");
  run.argv.insert(run.argv.end(), req.argv.begin(), req.argv.end());
  run.env = req.env;
  run.timeout_s = req.timeout_s;
  return run;
}

}  // namespace

task<exec_result> command_service::code_run(const std::string& org_id, const std::string& id_or_name,
                                    const code_run_request& req, const audit::actor& who) {
  auto run = code_to_exec(req);
  if (!run) co_return std::move(run).err();
  co_return co_await exec_noted(org_id, id_or_name, std::move(*run), who, code_run_note(req));
}

task<void> command_service::code_run_stream(const std::string& org_id, const std::string& id_or_name,
                                    const code_run_request& req, byte_sink& sink, const audit::actor& who) {
  auto run = code_to_exec(req);
  if (!run) co_return std::move(run).err();
  co_return co_await exec_stream_noted(org_id, id_or_name, std::move(*run), sink, who, code_run_note(req));
}

}  // namespace sandfort::sandbox
