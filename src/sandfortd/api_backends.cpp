#include "api_backends.hpp"

#include "secret_backend.hpp"
#include "webhook_backend.hpp"

#include "sandfort/audit/checkpointer.hpp"
#include "sandfort/auth/keys.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::daemon {

namespace asio = boost::asio;
using api::task;

namespace {

class gate_adapter final : public api::request_gate {
 public:
  explicit gate_adapter(const backend_parts& p) : p_(p) {}
  task<auth::principal> authenticate(std::string authorization, std::string request_id) override {
    return p_.authn.authenticate(std::move(authorization), std::move(request_id));
  }
  void note_auth_failure(const std::string& remote, const std::string& reason) override {
    p_.auth_failures.note(remote, reason);
  }
  void note_rate_refusal(const audit::rate_limit_refusal& r) override { p_.rate_refusals.note(r); }
  result<void> admit_write(bool relieves) override {
    return p_.db.admit(relieves ? store::write_kind::relief : store::write_kind::change);
  }

 private:
  const backend_parts& p_;
};

class sandbox_adapter final : public api::sandbox_backend {
 public:
  explicit sandbox_adapter(sandbox::service& s) : s_(s) {}
  task<sandbox::sandbox_view> create(const std::string& org_id, const sandbox::create_request& req,
                                     const audit::actor& who) override {
    return s_.create(org_id, req, who);
  }
  task<sandbox::sandbox_view> get(const std::string& org_id, const std::string& id_or_name,
                                  const std::string& wait_for, std::chrono::seconds wait) override {
    return s_.get(org_id, id_or_name, wait_for, wait);
  }
  task<sandbox::list_page> list(const std::string& org_id, const sandbox::list_request& req) override {
    return s_.list(org_id, req);
  }
  task<sandbox::sandbox_view> update(const std::string& org_id, const std::string& id_or_name,
                                     const sandbox::update_request& req, const audit::actor& who) override {
    return s_.update(org_id, id_or_name, req, who);
  }
  task<sandbox::sandbox_view> change_state(change c, const std::string& org_id, const std::string& id_or_name,
                                           const audit::actor& who) override {
    switch (c) {
      case change::stop: return s_.stop(org_id, id_or_name, who);
      case change::start: return s_.start(org_id, id_or_name, who);
      case change::pause: return s_.pause(org_id, id_or_name, who);
      case change::resume: break;
    }
    return s_.resume(org_id, id_or_name, who);
  }
  task<void> remove(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) override {
    return s_.remove(org_id, id_or_name, who);
  }
  task<sandbox::sandbox_metrics> metrics(const std::string& org_id, const std::string& id_or_name) override {
    return s_.metrics(org_id, id_or_name);
  }
  result<sandbox::preview_link> preview(const std::string& org_id, const std::string& id_or_name, int port) override {
    return s_.network().preview(org_id, id_or_name, port);
  }
  task<std::vector<sandbox::listening_port>> ports(const std::string& org_id, const std::string& id_or_name) override {
    return s_.network().ports(org_id, id_or_name);
  }

 private:
  sandbox::service& s_;
};

class command_adapter final : public api::command_backend {
 public:
  explicit command_adapter(sandbox::command_service& c) : c_(c) {}
  task<sandbox::exec_result> exec(const std::string& org_id, const std::string& id_or_name, sandbox::exec_request req,
                                  const audit::actor& who) override {
    return c_.exec(org_id, id_or_name, std::move(req), who);
  }
  task<sandbox::exec_result> code_run(const std::string& org_id, const std::string& id_or_name,
                                      const sandbox::code_run_request& req, const audit::actor& who) override {
    return c_.code_run(org_id, id_or_name, req, who);
  }
  task<void> exec_stream(const std::string& org_id, const std::string& id_or_name, sandbox::exec_request req,
                         sandbox::byte_sink& sink, const audit::actor& who) override {
    return c_.exec_stream(org_id, id_or_name, std::move(req), sink, who);
  }
  task<void> code_run_stream(const std::string& org_id, const std::string& id_or_name,
                             const sandbox::code_run_request& req, sandbox::byte_sink& sink,
                             const audit::actor& who) override {
    return c_.code_run_stream(org_id, id_or_name, req, sink, who);
  }
  task<sandbox::agent_session> connect_agent(const std::string& org_id, const std::string& id_or_name,
                                             const audit::actor& who, const audit::record* note) override {
    return c_.connect_agent(org_id, id_or_name, who, note);
  }
  void keep_agent(sandbox::agent_session& session) override { c_.keep_agent(session); }

 private:
  sandbox::command_service& c_;
};

// Volumes and snapshots: their services have the same four calls.
template <typename Service, typename View, typename Create, typename Page>
class named_resources final : public api::named_resource_backend<View, Create, Page> {
 public:
  explicit named_resources(Service& s) : s_(s) {}
  task<View> create(const std::string& org_id, const Create& req, const audit::actor& who) override {
    return s_.create(org_id, req, who);
  }
  result<Page> list(const std::string& org_id, const sandbox::name_page_request& req) override {
    return s_.list(org_id, req);
  }
  result<View> get(const std::string& org_id, const std::string& id_or_name) override {
    return s_.get(org_id, id_or_name);
  }
  task<void> remove(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) override {
    return s_.remove(org_id, id_or_name, who);
  }

 private:
  Service& s_;
};
using volume_adapter = named_resources<sandbox::volume_service, sandbox::volume_view, sandbox::volume_create_request,
                                sandbox::volume_page>;
using snapshot_adapter = named_resources<sandbox::snapshot_service, sandbox::snapshot_view, sandbox::snapshot_create_request,
                                  sandbox::snapshot_page>;

class identity_adapter final : public api::identity_backend {
 public:
  explicit identity_adapter(const backend_parts& p) : p_(p), orgs_(p.db) {}
  result<store::org> find_org(const std::string& id_or_name) override {
    auto o = orgs_.get_org(id_or_name);
    if (!o && o.err().code == errc::not_found) o = orgs_.find_org_by_name(id_or_name);
    return o;
  }
  result<std::vector<store::org>> list_orgs() override { return orgs_.list_orgs(); }
  result<store::org> create_org(const std::string& name, const std::string& actor_org,
                                const audit::actor& who) override {
    auto tx = p_.db.begin();
    if (!tx) return std::move(tx).err();
    auto o = orgs_.create_org(name, false, format_time(p_.clk.now()));
    if (!o) return o;
    audit::record r{"org.create", o->id, "ok", {{"name", name}}};
    for (const auto& chain : {o->id, actor_org})
      if (auto appended = p_.journal.append(chain, who, r); !appended) return std::move(appended).err();
    if (auto committed = tx->commit(); !committed) return std::move(committed).err();
    return o;
  }
  result<void> set_org_state(const std::vector<std::string>& chains, const audit::actor& who, const std::string& org_id,
                             const std::string& state, const std::vector<std::string>& from,
                             const audit::record& event) override {
    return p_.journal.record_change(
        chains, who,
        [&] { return orgs_.set_org_state(org_id, state, from, format_time(p_.clk.now())); },
        [&] { return event; });
  }
  result<issued_key> issue_key(const std::vector<std::string>& chains, const audit::actor& who,
                               const std::string& org_id, const std::string& name, auth::role role,
                               std::int64_t expires_in_s) override {
    // The organization's cap on keys that work (guardrails.max_api_keys): more keys would multiply
    // its per-key rate limits, and each is a credential to leak. Revoked and expired keys do not
    // count. Checked with no co_await before the insert, so parallel creates cannot overshoot it.
    auto working = orgs_.count_working_api_keys(org_id, format_time(p_.clk.now()));
    if (!working) return std::move(working).err();
    if (auto room = sandbox::admit_count(p_.journal, org_id, who,
                                         {"api_keys", p_.cfg.guardrails.max_api_keys, *working,
                                          "revoked and expired keys do not count; revoke some", {}});
        !room)
      return std::move(room).err();
    auto issued = p_.journal.record_change(
        chains, who, [&] { return auth::issue_key(orgs_, p_.clk, org_id, name, role, expires_in_s); },
        [&](const auth::issued_key& k) {
          // The key's id only: its secret never reaches the chain.
          return audit::record{"api_key.create", k.record.id, "ok",
                               {{"org_id", org_id}, {"name", k.record.name}, {"role", k.record.role},
                                {"expires_at", k.record.expires_at ? nlohmann::json(*k.record.expires_at)
                                                                   : nlohmann::json(nullptr)}}};
        });
    if (!issued) return std::move(issued).err();
    return issued_key{std::move(issued->record), std::move(issued->secret)};
  }
  result<std::vector<store::api_key>> list_keys(const std::string& org_id) override {
    return orgs_.list_api_keys(org_id);
  }
  result<void> revoke_key(const std::string& org_id, const std::string& key_id, const audit::actor& who) override {
    return p_.journal.record_change(
        {org_id}, who,
        [&] { return orgs_.revoke_api_key(org_id, key_id, format_time(p_.clk.now())); },
        [&] { return audit::record{"api_key.revoke", key_id}; });
  }
  result<int> revoke_org_keys(const std::string& org_id, const audit::actor& who) override {
    return p_.journal.record_change(
        {org_id}, who, [&] { return orgs_.revoke_org_keys(org_id, format_time(p_.clk.now())); },
        [&](int n) {
          return audit::record{"api_key.revoke_all", org_id, "ok", {{"revoked", n}}};
        });
  }
  result<auth::console_grant> open_console_session(const auth::principal& p, const std::string& api_key,
                                                   const audit::actor& who) override {
    return p_.journal.record_change(
        {p.org_id}, who, [&] { return auth::open_console_session(p_.db, p_.clk, {}, p, api_key); },
        [&](const auth::console_grant& g) {
          // The key's id names who signed in; neither the cookie nor the key reaches the chain.
          return audit::record{"console.sign_in", p.id, "ok", {{"expires_at", g.expires_at}}};
        });
  }
  result<void> close_console_session(const auth::principal& p, const audit::actor& who) override {
    return p_.journal.record_change(
        {p.org_id}, who, [&] { return auth::close_console_session(p_.db, p); },
        [&] { return audit::record{"console.sign_out", p.id}; });
  }
  std::vector<auth::console_issuer> console_issuers() override { return p_.console_login.issuers(); }
  task<auth::login_redirect> start_console_login(const std::string& issuer_id, const std::string& redirect_uri,
                                                 const std::string& source, const std::string& request_id) override {
    return p_.console_login.start(issuer_id, redirect_uri, source, request_id);
  }
  task<auth::proven_identity> finish_console_login(const auth::login_callback& callback,
                                                   const std::string& request_id) override {
    return p_.console_login.finish(callback, request_id);
  }
  result<auth::console_grant> open_identity_console_session(const auth::proven_identity& proven,
                                                            const audit::actor& who) override {
    return p_.journal.record_change(
        {proven.who.org_id}, who,
        [&] { return auth::open_identity_console_session(p_.db, p_.clk, {}, proven.who, proven.expires_at); },
        [&](const auth::console_grant& g) {
          // The user as the provider names them; neither the cookie nor a token reaches the chain.
          return audit::record{"console.sign_in", proven.who.id, "ok",
                               {{"expires_at", g.expires_at}, {"issuer", proven.who.issuer},
                                {"role", auth::to_string(proven.who.granted)}}};
        });
  }

 private:
  const backend_parts& p_;  // the database for transactions
  store::org_store orgs_;
};

// The chain as one connection reads it: the I/O thread's (audit_adapter), or the background
// reader's own (chain_rows).
template <typename Reader>
class chain_rows_of : public Reader {
 public:
  explicit chain_rows_of(store::database& db) : rows_(db) {}
  result<std::vector<audit::event_record>> events(const std::string& org_id, const store::audit_filter& f) override {
    return rows_.list_audit_events(org_id, f);
  }
  result<void> scan_events(const std::string& org_id, std::int64_t from_seq,
                           const std::function<bool(const audit::event_record&)>& each) override {
    return rows_.scan_audit_events(org_id, from_seq, each);
  }
  result<std::vector<audit::checkpoint_record>> checkpoints(const std::string& org_id, std::int64_t after,
                                                            std::size_t limit) override {
    return rows_.list_audit_checkpoints(org_id, after, limit);
  }

 private:
  store::audit_store rows_;
};
using chain_rows = chain_rows_of<api::audit_reader>;

class audit_adapter final : public chain_rows_of<api::audit_backend> {
 public:
  explicit audit_adapter(const backend_parts& p) : chain_rows_of(p.db), p_(p) {}
  asio::awaitable<result<nlohmann::json>> read_apart(
      std::function<result<nlohmann::json>(api::audit_reader&)> read) override {
    // Named: GCC 12 mishandles temporaries inside co_await expressions.
    auto apart = [read = std::move(read)](store::database& db) {
      chain_rows rows(db);
      return read(rows);
    };
    co_return co_await p_.reader.run(std::move(apart));
  }
  // The events since the latest checkpoint are re-hashed on the background reader; signing and
  // storing are quick.
  asio::awaitable<result<checkpoint_now_result>> checkpoint_now(const std::string& org_id) override {
    auto find = [org_id, &key = p_.audit_key](store::database& db) { return audit::find_head_to_sign(db, org_id, key); };
    auto head = co_await p_.reader.run(std::move(find));
    if (!head) co_return std::move(head).err();
    if (*head) {
      auto made = audit::sign_head(p_.db, **head, p_.audit_key, format_time(p_.clk.now()), p_.cfg.audit.export_path);
      if (!made) co_return std::move(made).err();
      if (*made) co_return checkpoint_now_result{std::move(**made), true};
    }
    auto latest = store::audit_store(p_.db).latest_audit_checkpoint(org_id);
    if (!latest) co_return std::move(latest).err();
    if (!*latest) co_return make_error(errc::conflict, "the audit chain of " + org_id + " has no events to sign yet");
    co_return checkpoint_now_result{std::move(**latest), false};
  }

 private:
  const backend_parts& p_;
};

class guardrail_adapter final : public api::guardrail_backend {
 public:
  explicit guardrail_adapter(sandbox::admission& a) : a_(a) {}
  result<sandbox::org_guardrails_view> guardrails(const std::string& org_id) override { return a_.guardrails(org_id); }
  result<sandbox::org_guardrails_view> set_limits(const std::string& org_id, const sandbox::limits_update& u,
                                                  const audit::actor& who) override {
    return a_.set_limits(org_id, u, who);
  }
  task<sandbox::stop_all_report> stop_all(const std::string& org_id, bool by_superadmin,
                                          const audit::actor& who) override {
    return a_.stop_all(org_id, by_superadmin, who);
  }
  result<void> lift_stop(const std::string& org_id, bool by_superadmin, const audit::actor& who) override {
    return a_.lift_stop(org_id, by_superadmin, who);
  }
  result<std::optional<proxy::egress_rule_set>> egress_defaults(const std::string& org_id) override {
    return a_.egress_defaults(org_id);
  }
  result<std::optional<proxy::egress_rule_set>> set_egress_defaults(const std::string& org_id,
                                                                    const std::optional<proxy::egress_rule_set>& set,
                                                                    const audit::actor& who) override {
    return a_.set_egress_defaults(org_id, set, who);
  }

 private:
  sandbox::admission& a_;
};

class daemon_adapter final : public api::daemon_backend {
 public:
  daemon_adapter(sandbox::service& s, store::sandbox_store sandboxes) : s_(s), sandboxes_(sandboxes) {}
  task<void> ready() override { return s_.ready(); }
  std::vector<sandbox::pool_status> pools() const override { return s_.pools(); }
  result<std::vector<std::pair<std::string, std::int64_t>>> sandboxes_by_state() override {
    return sandboxes_.count_live_sandboxes_by_state();
  }

 private:
  sandbox::service& s_;
  store::sandbox_store sandboxes_;
};

}  // namespace

api_backends::api_backends(backend_parts parts)
    : parts_(parts),
      gate_(std::make_unique<gate_adapter>(parts_)),
      sandboxes_(std::make_unique<sandbox_adapter>(parts_.sandboxes)),
      commands_(std::make_unique<command_adapter>(parts_.sandboxes.commands())),
      volumes_(std::make_unique<volume_adapter>(parts_.sandboxes.volumes())),
      snapshots_(std::make_unique<snapshot_adapter>(parts_.sandboxes.snapshots())),
      identity_(std::make_unique<identity_adapter>(parts_)),
      audit_(std::make_unique<audit_adapter>(parts_)),
      guardrails_(std::make_unique<guardrail_adapter>(parts_.sandboxes.admission())),
      daemon_(std::make_unique<daemon_adapter>(parts_.sandboxes, parts_.db)),
      secrets_(make_secret_backend(parts_.cfg, parts_.db, parts_.journal, parts_.clk, parts_.secrets_key)),
      webhooks_(make_webhook_backend(parts_.cfg, parts_.db, parts_.journal, parts_.clk, parts_.secrets_key,
                                     parts_.webhook_resolver, parts_.webhook_worker)) {}

api_backends::~api_backends() = default;

api::dependencies api_backends::dependencies(api::rate_limiter& limiter, sandbox::answer_workers& answer_workers,
                                             api::event_hub& events) {
  return {parts_.cfg, *gate_,     *sandboxes_,       *commands_, *volumes_,      *snapshots_, *identity_,
          *audit_,    *guardrails_, *daemon_, *secrets_, *webhooks_, parts_.audit_key, limiter, answer_workers, events};
}

}  // namespace sandfort::daemon
