#pragma once
// Commands in a started sandbox, through its agent (docs/api.md, "Processes"): one-shot exec and
// code-run, whole or streamed as server-sent events, and the connection the api module forwards
// sessions, background commands, files, git and the PTY over. Each call is recorded in the
// audit chain as `accepted` once the sandbox is found started and before it runs; one that
// cannot be recorded does not run. The server-side maxima (timeout, output cap) hold whatever
// the agent answers.

#include <memory>
#include <string>

#include "sandfort/audit/group_writer.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/sandbox/activity.hpp"
#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/transitions.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/read_cache.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

// A call counted as in progress, from before its event is recorded until it is dropped: an
// event recorded while no other call is in progress is committed on the I/O thread
// (group_writer::append, `lone`).
class call_in_progress {
 public:
  explicit call_in_progress(std::shared_ptr<std::size_t> count) : count_(std::move(count)) { ++*count_; }
  call_in_progress(call_in_progress&&) noexcept = default;
  call_in_progress& operator=(call_in_progress&&) = delete;
  ~call_in_progress() {
    if (count_) --*count_;
  }

 private:
  std::shared_ptr<std::size_t> count_;
};

// A connection to a sandbox's agent, which keeps the sandbox busy (the idle timeout) while it lives.
struct agent_session {
  agent_stream stream;
  activity_tracker::hold busy;
  agent_address at;
  call_in_progress running;
};

// The row of a sandbox for a call that needs it running: conflict when it is not started
// ("resume it first" when paused). Finding it is use of it (the idle timeout).
result<store::sandbox_record> find_started(store::sandbox_store sandboxes, activity_tracker& activity,
                                           const std::string& org_id, const std::string& id_or_name);

class command_service {
 public:
  // When the agent cannot be reached, `lifecycle` gives the verdict (a container that stopped
  // marks the row stopped, and the caller hears why), else the error as it is. The calls' events
  // go through `events` (group commits off the I/O thread).
  command_service(const config& cfg, store::database& db, agent_connector& agent, activity_tracker& activity,
                  audit::group_writer& events, transitions& lifecycle);

  task<exec_result> exec(const std::string& org_id, const std::string& id_or_name, exec_request req,
                         const audit::actor& who = audit::system_actor());
  task<exec_result> code_run(const std::string& org_id, const std::string& id_or_name, const code_run_request& req,
                             const audit::actor& who = audit::system_actor());
  // The same, with output streamed to sink as server-sent events. An error means nothing was
  // written to the sink.
  task<void> exec_stream(const std::string& org_id, const std::string& id_or_name, exec_request req, byte_sink& sink,
                         const audit::actor& who = audit::system_actor());
  task<void> code_run_stream(const std::string& org_id, const std::string& id_or_name, const code_run_request& req,
                             byte_sink& sink, const audit::actor& who = audit::system_actor());
  // A connection to the agent of a started sandbox (it serves sessions, commands, files, git and
  // the PTY itself), one kept from an earlier request when there is one. `note`, when given, is
  // recorded (its target set to the sandbox's id) first.
  task<agent_session> connect_agent(const std::string& org_id, const std::string& id_or_name,
                                    const audit::actor& who = audit::system_actor(),
                                    const audit::record* note = nullptr);
  // Keeps the session's connection for the sandbox's next request: its last answer was read to
  // its end (http::relay_result::upstream_reusable).
  void keep_agent(agent_session& session);

 private:
  // find_started, through started_.
  result<store::sandbox_record> started(const std::string& org_id, const std::string& id_or_name);
  result<agent_exec> prepare_exec(exec_request req) const;
  task<void> note_action(const store::sandbox_record& rec, const audit::actor& who, audit::record note);
  task<exec_result> exec_noted(const std::string& org_id, const std::string& id_or_name, exec_request req,
                               const audit::actor& who, audit::record note);
  task<void> exec_stream_noted(const std::string& org_id, const std::string& id_or_name, exec_request req,
                               byte_sink& sink, const audit::actor& who, audit::record note);

  const config& cfg_;
  store::database& db_;
  store::sandbox_store sandboxes_;
  // The rows of started sandboxes that commands were run in lately (store/read_cache.hpp): a
  // command's lookup is not read again while no sandbox's row has changed in this process, for
  // at most 1 s. Any change to any sandbox drops them all: simple, and never less than correct.
  store::read_cache<store::sandbox_record> started_;
  agent_connector& agent_;
  activity_tracker& activity_;
  audit::group_writer& events_;
  std::shared_ptr<std::size_t> calls_in_progress_ = std::make_shared<std::size_t>(0);
  transitions& transitions_;
};

}  // namespace sandfort::sandbox
