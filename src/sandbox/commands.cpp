// Commands in a running sandbox, through its agent.
#include "sandfort/sandbox/service.hpp"

namespace sandfort::sandbox {

result<store::sandbox_record> service::require_started(const std::string& org_id, const std::string& id_or_name) {
  auto rec = db_.get_sandbox(org_id, id_or_name);
  if (!rec) return rec;
  if (rec->state != "started")
    return make_error(errc::conflict, "sandbox " + rec->id + " is " + rec->state + "; it must be started for this call");
  return rec;
}

task<exec_result> service::exec(const std::string& org_id, const std::string& id_or_name, exec_request req) {
  if (req.argv.empty() == req.command.empty())
    co_return make_error(errc::invalid_argument, "give exactly one of command (a shell command line) or argv");
  std::int64_t timeout_s = req.timeout_s.value_or(cfg_.exec_default_timeout_s);
  if (timeout_s <= 0 || timeout_s > cfg_.exec_max_timeout_s)
    co_return make_error(errc::invalid_argument,
                         "timeout_s must be between 1 and " + std::to_string(cfg_.exec_max_timeout_s));
  for (const auto& [k, v] : req.env)
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos)
      co_return make_error(errc::invalid_argument, "env name '" + k + "' is not a valid variable name");

  auto rec = require_started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  agent_exec call{std::move(req), std::chrono::seconds(timeout_s), cfg_.output_cap_bytes};
  auto r = co_await agent_.exec(rec->id, call);
  if (r || r.err().code != errc::unavailable) co_return r;

  // The agent is gone: tell a stopped container (exit, OOM) from a transient failure.
  auto name = container_name(rec->id);
  auto info = co_await engine_.inspect_container(name);
  if (info && !info->running) {
    std::string why = "the sandbox's container exited with code " + std::to_string(info->exit_code) +
                      (info->oom_killed ? " (out of memory)" : "");
    (void)set_state(*rec, "stopped", why);
    co_return make_error(errc::conflict, "sandbox " + rec->id + " is stopped: " + why);
  }
  co_return r;
}

task<exec_result> service::code_run(const std::string& org_id, const std::string& id_or_name,
                                    const code_run_request& req) {
  exec_request run;
  if (req.language == "python")
    run.argv = {"python3", "-c", req.code};
  else if (req.language == "node")
    run.argv = {"node", "-e", req.code};
  else if (req.language == "bash" || req.language == "sh")
    run.argv = {req.language, "-c", req.code, req.language};  // the last one is $0
  else
    co_return make_error(errc::invalid_argument, "language must be one of python, node, bash, sh");
  run.argv.insert(run.argv.end(), req.argv.begin(), req.argv.end());
  run.env = req.env;
  run.timeout_s = req.timeout_s;
  co_return co_await exec(org_id, id_or_name, std::move(run));
}

}  // namespace sandfort::sandbox
