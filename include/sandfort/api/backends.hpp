#pragma once
// What the API needs from the rest of the daemon, declared by the API (as moby's routers declare
// their backends): one small interface per role its routes play. The daemon implements them over
// sandbox::service and the stores (src/sandfortd/api_backends.cpp); the unit tests over fakes
// (tests/unit/api/fake_backends.hpp). Nothing here names store::database or sandbox::service:
// the records passed through (a sandbox's view, an organization's row, an audit event) are the
// modules' plain value types.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sandfort/audit/journal.hpp"
#include "sandfort/audit/rate_limit_summary.hpp"
#include "sandfort/audit/records.hpp"
#include "sandfort/auth/console_login.hpp"
#include "sandfort/auth/console_sessions.hpp"
#include "sandfort/auth/principal.hpp"
#include "sandfort/sandbox/commands.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/sandbox/warm_pool.hpp"
#include "sandfort/secrets/types.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/webhooks/types.hpp"

namespace sandfort::api {

template <typename T>
using task = sandbox::task<T>;

// The guard's (api.cpp): who is asking, what is counted when they may not, and whether the
// state disk still takes a write.
class request_gate {
 public:
  virtual ~request_gate() = default;
  // The principal an Authorization header's value names (an API key or an identity provider's token).
  virtual task<auth::principal> authenticate(std::string authorization, std::string request_id) = 0;
  // Counted into the audit chain's auth.failures and rate-limit records.
  virtual void note_auth_failure(const std::string& remote, const std::string& reason) = 0;
  virtual void note_rate_refusal(const audit::rate_limit_refusal& r) = 0;
  // insufficient_storage while the state disk is full; `relieves`: a write that frees space or ends harm.
  virtual result<void> admit_write(bool relieves) = 0;
};

// A sandbox's life, its ports and previews, its metrics (sandbox_routes.cpp, org_lifecycle.cpp).
class sandbox_backend {
 public:
  virtual ~sandbox_backend() = default;
  virtual task<sandbox::sandbox_view> create(const std::string& org_id, const sandbox::create_request& req,
                                             const audit::actor& who) = 0;
  // Waits up to `wait` for `wait_for` (a state) when it is not empty.
  virtual task<sandbox::sandbox_view> get(const std::string& org_id, const std::string& id_or_name,
                                          const std::string& wait_for, std::chrono::seconds wait) = 0;
  virtual task<sandbox::list_page> list(const std::string& org_id, const sandbox::list_request& req) = 0;
  virtual task<sandbox::sandbox_view> update(const std::string& org_id, const std::string& id_or_name,
                                             const sandbox::update_request& req, const audit::actor& who) = 0;
  enum class change { stop, start, pause, resume };
  virtual task<sandbox::sandbox_view> change_state(change c, const std::string& org_id, const std::string& id_or_name,
                                                   const audit::actor& who) = 0;
  virtual task<void> remove(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) = 0;
  virtual task<sandbox::sandbox_metrics> metrics(const std::string& org_id, const std::string& id_or_name) = 0;
  virtual result<sandbox::preview_link> preview(const std::string& org_id, const std::string& id_or_name, int port) = 0;
  virtual task<std::vector<sandbox::listening_port>> ports(const std::string& org_id, const std::string& id_or_name) = 0;
};

// Commands in a started sandbox, and the connection to its agent for what it serves itself
// (stream_routes.cpp).
class command_backend {
 public:
  virtual ~command_backend() = default;
  virtual task<sandbox::exec_result> exec(const std::string& org_id, const std::string& id_or_name,
                                          sandbox::exec_request req, const audit::actor& who) = 0;
  virtual task<sandbox::exec_result> code_run(const std::string& org_id, const std::string& id_or_name,
                                              const sandbox::code_run_request& req, const audit::actor& who) = 0;
  // Output to `sink` as server-sent events; an error means nothing was written.
  virtual task<void> exec_stream(const std::string& org_id, const std::string& id_or_name, sandbox::exec_request req,
                                 sandbox::byte_sink& sink, const audit::actor& who) = 0;
  virtual task<void> code_run_stream(const std::string& org_id, const std::string& id_or_name,
                                     const sandbox::code_run_request& req, sandbox::byte_sink& sink,
                                     const audit::actor& who) = 0;
  // `note`, when given, is recorded in the audit chain (its target the sandbox's id) first.
  virtual task<sandbox::agent_session> connect_agent(const std::string& org_id, const std::string& id_or_name,
                                                     const audit::actor& who, const audit::record* note) = 0;
  // The session's connection serves the sandbox's next request: its last answer was read whole.
  virtual void keep_agent(sandbox::agent_session&) {}
};

// An organization's named resources kept apart from any sandbox: volumes and snapshots
// (named_resource_routes.cpp, org_lifecycle.cpp). The same four calls for both.
template <typename View, typename Create, typename Page>
class named_resource_backend {
 public:
  virtual ~named_resource_backend() = default;
  virtual task<View> create(const std::string& org_id, const Create& req, const audit::actor& who) = 0;
  virtual result<Page> list(const std::string& org_id, const sandbox::name_page_request& req) = 0;
  virtual result<View> get(const std::string& org_id, const std::string& id_or_name) = 0;
  virtual task<void> remove(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) = 0;
};
using volume_backend = named_resource_backend<sandbox::volume_view, sandbox::volume_create_request, sandbox::volume_page>;
using snapshot_backend =
    named_resource_backend<sandbox::snapshot_view, sandbox::snapshot_create_request, sandbox::snapshot_page>;

// Organizations and their API keys (identity_routes.cpp, org_lifecycle.cpp, resolve_target_org).
// Each change is recorded in the audit chains named (`chains`: the organization's, and the
// actor's when it is another) in the same transaction.
class identity_backend {
 public:
  virtual ~identity_backend() = default;
  // By id, then by name; deleted ones too (the caller says whether it may name them).
  virtual result<store::org> find_org(const std::string& id_or_name) = 0;
  virtual result<std::vector<store::org>> list_orgs() = 0;
  // A new organization; its chain starts with org.create, and so does `actor_org`'s.
  virtual result<store::org> create_org(const std::string& name, const std::string& actor_org,
                                        const audit::actor& who) = 0;
  // From one of `from` to `state`, with `event`.
  virtual result<void> set_org_state(const std::vector<std::string>& chains, const audit::actor& who,
                                     const std::string& org_id, const std::string& state,
                                     const std::vector<std::string>& from, const audit::record& event) = 0;
  // Within the organization's cap on working keys (quota_exceeded beyond it); api_key.create.
  struct issued_key {
    store::api_key record;
    std::string secret;  // shown once
  };
  virtual result<issued_key> issue_key(const std::vector<std::string>& chains, const audit::actor& who,
                                       const std::string& org_id, const std::string& name, auth::role role,
                                       std::int64_t expires_in_s) = 0;
  virtual result<std::vector<store::api_key>> list_keys(const std::string& org_id) = 0;
  virtual result<void> revoke_key(const std::string& org_id, const std::string& key_id, const audit::actor& who) = 0;
  // Every key of the organization (api_key.revoke_all); how many.
  virtual result<int> revoke_org_keys(const std::string& org_id, const audit::actor& who) = 0;
  // The console's sign-in (console_routes.cpp): a session for the principal `api_key` authenticated
  // as (console.sign_in), and its end (console.sign_out).
  virtual result<auth::console_grant> open_console_session(const auth::principal& p, const std::string& api_key,
                                                           const audit::actor& who) = 0;
  virtual result<void> close_console_session(const auth::principal& p, const audit::actor& who) = 0;
  // The console's sign-in through an identity provider (console_routes.cpp, auth/console_login.hpp):
  // the issuers that offer it; a sign-in begun (nobody is signed in yet, so nothing is audited);
  // one finished, each failure's message a login_error code; and the session its principal then
  // opens (console.sign_in, that principal the actor).
  virtual std::vector<auth::console_issuer> console_issuers() = 0;
  virtual task<auth::login_redirect> start_console_login(const std::string& issuer_id, const std::string& redirect_uri,
                                                         const std::string& source, const std::string& request_id) = 0;
  virtual task<auth::proven_identity> finish_console_login(const auth::login_callback& callback,
                                                           const std::string& request_id) = 0;
  virtual result<auth::console_grant> open_identity_console_session(const auth::proven_identity& proven,
                                                                    const audit::actor& who) = 0;
};

// The audit chain as read: its events and signed checkpoints.
class audit_reader {
 public:
  virtual ~audit_reader() = default;
  virtual result<std::vector<audit::event_record>> events(const std::string& org_id, const store::audit_filter& f) = 0;
  // Every event from seq `from_seq` on, ascending, until `each` says false.
  virtual result<void> scan_events(const std::string& org_id, std::int64_t from_seq,
                                   const std::function<bool(const audit::event_record&)>& each) = 0;
  // Up to `limit` checkpoints with seq > after, ascending.
  virtual result<std::vector<audit::checkpoint_record>> checkpoints(const std::string& org_id, std::int64_t after,
                                                                    std::size_t limit) = 0;
};

// audit_routes.cpp: short reads on the I/O thread, long ones apart, and checkpoints on demand.
class audit_backend : public audit_reader {
 public:
  // A long read (an export, a verification) off the I/O thread, over a reader of its own;
  // `unavailable` when too many wait already. `read` must own what it uses.
  virtual boost::asio::awaitable<result<nlohmann::json>> read_apart(
      std::function<result<nlohmann::json>(audit_reader&)> read) = 0;
  // A checkpoint of the chain's head now: `made` when it is new, else the latest (conflict when
  // the chain has no events yet).
  struct checkpoint_now_result {
    audit::checkpoint_record checkpoint;
    bool made = false;
  };
  virtual boost::asio::awaitable<result<checkpoint_now_result>> checkpoint_now(const std::string& org_id) = 0;
};

// An organization's limits and kill switch (guardrail_routes.cpp).
class guardrail_backend {
 public:
  virtual ~guardrail_backend() = default;
  virtual result<sandbox::org_guardrails_view> guardrails(const std::string& org_id) = 0;
  virtual result<sandbox::org_guardrails_view> set_limits(const std::string& org_id, const sandbox::limits_update& u,
                                                          const audit::actor& who) = 0;
  virtual task<sandbox::stop_all_report> stop_all(const std::string& org_id, bool by_superadmin,
                                                  const audit::actor& who) = 0;
  virtual result<void> lift_stop(const std::string& org_id, bool by_superadmin, const audit::actor& who) = 0;
  // The organization's egress defaults (docs/egress.md); nullopt: none.
  virtual result<std::optional<proxy::egress_rule_set>> egress_defaults(const std::string& org_id) = 0;
  virtual result<std::optional<proxy::egress_rule_set>> set_egress_defaults(
      const std::string& org_id, const std::optional<proxy::egress_rule_set>& set, const audit::actor& who) = 0;
};

// An organization's secrets (secret_routes.cpp, org_lifecycle.cpp): values go in sealed and never
// come out; each change is recorded in the organization's chain with name and hosts only.
// Requests arrive validated (secret_bodies.cpp).
class secret_backend {
 public:
  virtual ~secret_backend() = default;
  // conflict when the name is taken; quota_exceeded beyond the organization's number of secrets.
  virtual result<secrets::secret_view> create(const std::string& org_id, const secrets::secret_create& req,
                                              const audit::actor& who) = 0;
  virtual result<std::vector<secrets::secret_view>> list(const std::string& org_id) = 0;
  virtual result<secrets::secret_view> get(const std::string& org_id, const std::string& name) = 0;
  virtual result<secrets::secret_view> rotate(const std::string& org_id, const std::string& name,
                                              const secrets::secret_rotate& req, const audit::actor& who) = 0;
  virtual result<void> remove(const std::string& org_id, const std::string& name, const audit::actor& who) = 0;
  // Every secret of the organization (one secret.delete each) and its interception CA; how many.
  virtual result<int> remove_all(const std::string& org_id, const audit::actor& who) = 0;
  // The certificate (PEM) of the organization's interception CA, made on first need.
  virtual result<std::string> interception_ca_pem(const std::string& org_id) = 0;
};

// An organization's webhooks and their delivery logs (webhook_routes.cpp, org_lifecycle.cpp):
// each change is recorded in the organization's chain (webhook.create|update|delete), never the
// signing secret. A URL is checked against the address policy before it is stored.
class webhook_backend {
 public:
  virtual ~webhook_backend() = default;
  // quota_exceeded beyond webhooks.max_per_org; invalid_argument for a refused destination.
  virtual task<webhooks::webhook_with_secret> create(const std::string& org_id, const webhooks::webhook_create& req,
                                                     const audit::actor& who) = 0;
  virtual result<std::vector<webhooks::webhook_view>> list(const std::string& org_id) = 0;
  virtual result<webhooks::webhook_view> get(const std::string& org_id, const std::string& id) = 0;
  virtual task<webhooks::webhook_view> update(const std::string& org_id, const std::string& id,
                                              const webhooks::webhook_patch& req, const audit::actor& who) = 0;
  virtual result<void> remove(const std::string& org_id, const std::string& id, const audit::actor& who) = 0;
  // A new signing secret, in force from the next attempt on; the old one also signs for
  // `keep_previous_s` more seconds (0: not at all). Recorded as webhook.update.
  virtual result<webhooks::webhook_with_secret> rotate_secret(const std::string& org_id, const std::string& id,
                                                              std::int64_t keep_previous_s,
                                                              const audit::actor& who) = 0;
  // Newest first: seq < before (0: from the newest), at most limit.
  virtual result<webhooks::delivery_page> deliveries(const std::string& org_id, const std::string& id,
                                                     std::int64_t before, std::size_t limit) = 0;
  // Every webhook of the organization (one webhook.delete each); how many.
  virtual result<int> remove_all(const std::string& org_id, const audit::actor& who) = 0;
};

// The daemon as the operator sees it (health_routes.cpp, pool_routes.cpp, metrics_routes.cpp).
class daemon_backend {
 public:
  virtual ~daemon_backend() = default;
  // ok when the daemon can serve (its engine answers).
  virtual task<void> ready() = 0;
  virtual std::vector<sandbox::pool_status> pools() const = 0;
  // Sandboxes not deleted, by state.
  virtual result<std::vector<std::pair<std::string, std::int64_t>>> sandboxes_by_state() = 0;
};

}  // namespace sandfort::api
