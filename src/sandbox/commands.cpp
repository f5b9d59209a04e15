// Commands in a running sandbox, through its agent.
#include "sandfort/sandbox/service.hpp"

namespace sandfort::sandbox {

namespace {

// Commands are recorded as given, cut at a length that keeps an event small; environment
// variables by name only (values are where secrets go).
constexpr std::size_t recorded_text = 1024;

// At a character boundary: never in the middle of a UTF-8 sequence.
std::string cut(const std::string& s) {
  if (s.size() <= recorded_text) return s;
  std::size_t end = recorded_text;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end) + "…";
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

}  // namespace

result<store::sandbox_record> service::require_started(const std::string& org_id, const std::string& id_or_name) {
  auto rec = db_.get_sandbox(org_id, id_or_name);
  if (!rec) return rec;
  if (rec->state != "started")
    return make_error(errc::conflict, "sandbox " + rec->id + " is " + rec->state + "; it must be started for this call");
  return rec;
}

result<agent_exec> service::prepare_exec(exec_request req) const {
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

task<exec_result> service::explain_unreachable_agent(store::sandbox_record& rec, error e) {
  // The agent is gone: tell a stopped container (exit, OOM) from a transient failure.
  auto info = co_await engine_.inspect_container(rec.container_id);
  if (info && !info->running) {
    std::string why = "the sandbox's container exited with code " + std::to_string(info->exit_code) +
                      (info->oom_killed ? " (out of memory)" : "");
    (void)set_state(rec, "stopped", why);
    co_return make_error(errc::conflict, "sandbox " + rec.id + " is stopped: " + why);
  }
  co_return e;
}

result<void> service::note_action(const store::sandbox_record& rec, const audit::actor& who, audit::record note) {
  note.target = rec.id;
  auto e = journal_.record_event(rec.org_id, who, note);
  if (!e) return std::move(e).err();
  return {};
}

task<exec_result> service::exec_noted(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                      const audit::actor& who, audit::record note) {
  auto call = prepare_exec(std::move(req));
  if (!call) co_return std::move(call).err();
  auto rec = require_started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (auto noted = note_action(*rec, who, std::move(note)); !noted) co_return std::move(noted).err();
  auto r = co_await agent_.exec(agent_address_of(*rec), *call);
  if (r || r.err().code != errc::unavailable) co_return r;
  co_return co_await explain_unreachable_agent(*rec, std::move(r).err());
}

task<void> service::exec_stream_noted(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                      byte_sink& sink, const audit::actor& who, audit::record note) {
  auto call = prepare_exec(std::move(req));
  if (!call) co_return std::move(call).err();
  auto rec = require_started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (auto noted = note_action(*rec, who, std::move(note)); !noted) co_return std::move(noted).err();
  auto r = co_await agent_.exec_stream(agent_address_of(*rec), *call, sink);
  if (r || r.err().code != errc::unavailable) co_return r;
  auto explained = co_await explain_unreachable_agent(*rec, std::move(r).err());
  co_return std::move(explained).err();
}

task<exec_result> service::exec(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                const audit::actor& who) {
  auto note = exec_note(req);
  co_return co_await exec_noted(org_id, id_or_name, std::move(req), who, std::move(note));
}

task<void> service::exec_stream(const std::string& org_id, const std::string& id_or_name, exec_request req,
                                byte_sink& sink, const audit::actor& who) {
  auto note = exec_note(req);
  co_return co_await exec_stream_noted(org_id, id_or_name, std::move(req), sink, who, std::move(note));
}

task<agent_stream> service::connect_agent(const std::string& org_id, const std::string& id_or_name,
                                          const audit::actor& who, const audit::record* note) {
  auto rec = require_started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (note)
    if (auto noted = note_action(*rec, who, *note); !noted) co_return std::move(noted).err();
  co_return co_await agent_.connect(agent_address_of(*rec));
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

task<exec_result> service::code_run(const std::string& org_id, const std::string& id_or_name,
                                    const code_run_request& req, const audit::actor& who) {
  auto run = code_to_exec(req);
  if (!run) co_return std::move(run).err();
  co_return co_await exec_noted(org_id, id_or_name, std::move(*run), who, code_run_note(req));
}

task<void> service::code_run_stream(const std::string& org_id, const std::string& id_or_name,
                                    const code_run_request& req, byte_sink& sink, const audit::actor& who) {
  auto run = code_to_exec(req);
  if (!run) co_return std::move(run).err();
  co_return co_await exec_stream_noted(org_id, id_or_name, std::move(*run), sink, who, code_run_note(req));
}

}  // namespace sandfort::sandbox
