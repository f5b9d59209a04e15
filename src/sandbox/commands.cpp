// Commands in a running sandbox, through its agent (commands.hpp).
#include "sandfort/sandbox/commands.hpp"

#include "sandfort/metrics/catalog.hpp"
#include "sandfort/sandbox/spec.hpp"

#include "output_cap.hpp"

#include <algorithm>
#include <optional>
#include <string_view>

namespace sandfort::sandbox {

namespace {

// Commands are recorded as given, cut at a length that keeps an event small; environment
// variables by name only (values are where secrets go).
constexpr std::size_t recorded_text = 1024;

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

}  // namespace

result<store::sandbox_record> find_started(store::sandbox_store sandboxes, activity_tracker& activity,
                                           const std::string& org_id, const std::string& id_or_name) {
  auto rec = sandboxes.get_sandbox(org_id, id_or_name);
  if (!rec) return rec;
  if (rec->state == "paused")
    return make_error(errc::conflict, "sandbox " + rec->id + " is paused; resume it first");
  if (rec->state != "started")
    return make_error(errc::conflict, "sandbox " + rec->id + " is " + rec->state + "; it must be started for this call");
  activity.touch(rec->id);  // every call that needs it started is use (the idle timeout)
  return rec;
}

command_service::command_service(const config& cfg, store::database& db, agent_connector& agent,
                                 activity_tracker& activity, audit::group_writer& events, transitions& lifecycle)
    : cfg_(cfg),
      db_(db),
      sandboxes_(db),
      started_(&store::sandbox_store::generation),
      agent_(agent),
      activity_(activity),
      events_(events),
      transitions_(lifecycle) {}

result<store::sandbox_record> command_service::started(const std::string& org_id, const std::string& id_or_name) {
  const time_point now = std::chrono::system_clock::now();
  std::string key = org_id + "/" + id_or_name;  // an organization's id has no '/'
  if (const store::sandbox_record* kept = started_.find(key, now)) {
    activity_.touch(kept->id);
    return *kept;
  }
  const std::uint64_t generation = started_.generation();  // before the read: a change after it moves it
  auto rec = find_started(sandboxes_, activity_, org_id, id_or_name);
  if (rec && !db_.in_transaction()) started_.put(key, *rec, generation, now);
  return rec;
}

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

task<void> command_service::note_action(const store::sandbox_record& rec, const audit::actor& who, audit::record note) {
  note.target = rec.id;
  const bool lone = *calls_in_progress_ == 1 && !db_.in_transaction();  // this call only
  auto e = co_await events_.append(rec.org_id, who, std::move(note), lone);
  if (!e) co_return std::move(e).err();
  co_return ok_t{};
}

task<exec_result> command_service::exec_noted(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                      const audit::actor& who, audit::record note) {
  call_in_progress running(calls_in_progress_);
  if (auto over = above_max_timeout(req, cfg_.exec_max_timeout_s)) {
    auto rec = sandboxes_.get_sandbox(org_id, id_or_name);
    if (!rec) co_return std::move(rec).err();
    auto refused = refusal(std::move(note), *req.timeout_s, cfg_.exec_max_timeout_s);
    auto noted = co_await note_action(*rec, who, std::move(refused));
    if (!noted) co_return std::move(noted).err();
    co_return std::move(*over);
  }
  auto call = prepare_exec(std::move(req));
  if (!call) co_return std::move(call).err();
  auto rec = started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  note.details["timeout_s"] = std::chrono::duration_cast<std::chrono::seconds>(call->timeout).count();
  auto noted = co_await note_action(*rec, who, std::move(note));
  if (!noted) co_return std::move(noted).err();
  const auto busy = activity_.busy(rec->id);  // a command running is use, however long (idle timeout)
  // Timed from the request to the agent to its last byte (sandfort_exec_duration_seconds);
  // refusals before the agent is asked (bad input, not started) are not commands.
  metrics::timer timed(metrics::exec_duration(), {"whole", "error"});
  auto r = co_await agent_.exec(agent_address_of(*rec), *call);
  if (r) timed.values()[1] = "ok";
  timed.stop();
  if (r) hold_to_cap(*r, call->max_output_bytes);
  if (r || r.err().code != errc::unavailable) co_return r;
  co_return co_await transitions_.explain_unreachable_agent(*rec, std::move(r).err());
}

task<void> command_service::exec_stream_noted(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                      byte_sink& sink, const audit::actor& who, audit::record note) {
  call_in_progress running(calls_in_progress_);
  if (auto over = above_max_timeout(req, cfg_.exec_max_timeout_s)) {
    auto rec = sandboxes_.get_sandbox(org_id, id_or_name);
    if (!rec) co_return std::move(rec).err();
    auto refused = refusal(std::move(note), *req.timeout_s, cfg_.exec_max_timeout_s);
    auto noted = co_await note_action(*rec, who, std::move(refused));
    if (!noted) co_return std::move(noted).err();
    co_return std::move(*over);
  }
  auto call = prepare_exec(std::move(req));
  if (!call) co_return std::move(call).err();
  auto rec = started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  note.details["timeout_s"] = std::chrono::duration_cast<std::chrono::seconds>(call->timeout).count();
  auto noted = co_await note_action(*rec, who, std::move(note));
  if (!noted) co_return std::move(noted).err();
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
  if (!r && r.err().code == errc::unavailable) r = co_await transitions_.explain_unreachable_agent(*rec, std::move(r).err());
  // Events went out already: the error is the stream's last event, not the answer's status.
  if (!r) {
    bool told = co_await capped.fail(r.err());  // (not inside &&: GCC 12 miscompiles co_await there)
    if (told) co_return ok_t{};
  }
  co_return r;
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
  call_in_progress running(calls_in_progress_);
  auto rec = started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (note) {
    auto noted = co_await note_action(*rec, who, *note);
    if (!noted) co_return std::move(noted).err();
  }
  agent_address at = agent_address_of(*rec);
  auto stream = co_await agent_.connect_kept(at);
  if (!stream) co_return std::move(stream).err();
  co_return agent_session{std::move(*stream), activity_.busy(rec->id), std::move(at), std::move(running)};
}

void command_service::keep_agent(agent_session& session) { agent_.keep(session.at, std::move(session.stream)); }

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
