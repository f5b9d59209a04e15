#pragma once
// Fakes of every backend the API declares (sandfort/api/backends.hpp), over one small world of
// two organizations and the operator's. Each call is written down — what was asked, for which
// organization, on what, by whom — so that a test can say the route called the backend with the
// caller's organization and nothing else. A resource asked for by an organization that does not
// own it is not_found, as the real services answer.

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../store/temp_dir.hpp"
#include "sandfort/api/api.hpp"
#include "sandfort/core/clock.hpp"

namespace sandfort::api::test {

namespace asio = boost::asio;

// The world: organization A (alpha) whose keys call, organization B (beta) whose resources they
// must not reach, and the operator's.
inline const std::string org_a = "org-aaaaaaaaaaaaaaaa", org_b = "org-bbbbbbbbbbbbbbbb",
                         org_root = "org-0000000000000000";

struct call {
  std::string what;    // "sandboxes.create", "identity.issue_key", …
  std::string org_id;  // the organization the call acts for
  std::string target;  // the id or name it names, if any
  std::string actor;   // audit::actor::name, if the call takes one
};

struct world {
  std::vector<call> calls;
  // Resources by id or name → the organization that owns it.
  std::map<std::string, std::string> owner = {{"sbx-a", org_a},  {"sbx-b", org_b},   {"vol-a", org_a},
                                              {"vol-b", org_b},  {"snap-a", org_a}, {"snap-b", org_b},
                                              {"key-a", org_a},  {"key-b", org_b}};
  std::vector<store::org> orgs = {
      {org_root, "superadmin", true, "2026-01-01T00:00:00.000Z", "active", std::nullopt},
      {org_a, "alpha", false, "2026-01-01T00:00:00.000Z", "active", std::nullopt},
      {org_b, "beta", false, "2026-01-01T00:00:00.000Z", "active", std::nullopt},
  };
  // What the next call of its kind gives back, where a test wants to choose.
  sandbox::exec_result next_exec;
  std::vector<audit::event_record> events;  // of org A
  store::audit_filter last_filter;
  sandbox::list_request last_list;
  sandbox::create_request last_create;
  sandbox::exec_request last_exec;
  std::optional<sandbox::limits_update> last_limits;
  auth::role last_role = auth::role::viewer;
  // The console's sign-in through an identity provider: what finish gives back (an error whose
  // message is a login_error code, or this identity), and what the routes passed on.
  std::optional<error> login_failure;
  auth::login_callback last_callback;
  std::string last_redirect_uri;

  void note(std::string what, const std::string& org, const std::string& target = {}, const std::string& actor = {}) {
    calls.push_back({std::move(what), org, target, actor});
  }
  // The owner check every real service makes.
  result<void> owned(const std::string& org, const std::string& id) const {
    auto it = owner.find(id);
    if (it == owner.end() || it->second != org) return make_error(errc::not_found, id + " not found");
    return {};
  }
  sandbox::sandbox_view view(const std::string& id) const {
    sandbox::sandbox_view v;
    v.id = id;
    v.name = "named-" + id;
    v.state = "started";
    v.snapshot = "python:3.12";
    v.created_at = v.updated_at = "2026-01-01T00:00:00.000Z";
    v.spec.limits = {1, 512, 256, 1024};
    v.spec.env = {{"SECRET", "never shown"}};
    v.spec.labels = {{"team", "a"}};
    return v;
  }
  sandbox::org_guardrails_view guardrails(const std::string& org) const {
    sandbox::org_guardrails_view v;
    v.org_id = org;
    v.limits.max_sandboxes = 10;
    v.usage.sandboxes = 2;
    return v;
  }
};

class fake_gate final : public request_gate {
 public:
  explicit fake_gate(world& w) : w_(w) {}
  // "Bearer viewer|member|admin": a key of org A with that role; "Bearer superadmin": the operator's.
  // The console's cookie "viewer|member|admin" ("Console <role>"): that key's console session,
  // whose CSRF token is "csrf-<role>".
  task<auth::principal> authenticate(std::string authorization, std::string) override {
    const bool console = authorization.starts_with(auth::console_scheme);
    const std::string who = authorization.rfind("Bearer ", 0) == 0 ? authorization.substr(7)
                            : console                              ? authorization.substr(auth::console_scheme.size())
                                                                   : "";
    auth::principal p;
    p.org_id = org_a;
    p.org_name = "alpha";
    p.id = "key-" + who;
    p.name = who;
    if (who == "superadmin") {
      p.org_id = org_root;
      p.org_name = "superadmin";
      p.superadmin = true;
      p.granted = auth::role::admin;
    } else if (auto r = auth::parse_role(who); r && !who.empty()) {
      p.granted = *r;
    } else {
      co_return make_error(errc::unauthenticated, "missing or invalid API key");
    }
    if (console) {
      p.console_session = "session-" + who;
      p.console_csrf = "csrf-" + who;
    }
    co_return p;
  }
  void note_auth_failure(const std::string& remote, const std::string&) override { w_.note("gate.auth_failure", "", remote); }
  void note_rate_refusal(const audit::rate_limit_refusal& r) override { w_.note("gate.rate_refusal", r.org_id); }
  result<void> admit_write(bool) override { return {}; }

 private:
  world& w_;
};

class fake_sandboxes final : public sandbox_backend {
 public:
  explicit fake_sandboxes(world& w) : w_(w) {}
  task<sandbox::sandbox_view> create(const std::string& org, const sandbox::create_request& req,
                                     const audit::actor& who) override {
    w_.note("sandboxes.create", org, req.name, who.name);
    w_.last_create = req;
    co_return w_.view("sbx-new");
  }
  task<sandbox::sandbox_view> get(const std::string& org, const std::string& id, const std::string& wait_for,
                                  std::chrono::seconds) override {
    w_.note("sandboxes.get", org, id, wait_for);
    if (auto r = w_.owned(org, id); !r) co_return std::move(r).err();
    co_return w_.view(id);
  }
  task<sandbox::list_page> list(const std::string& org, const sandbox::list_request& req) override {
    w_.note("sandboxes.list", org);
    w_.last_list = req;
    sandbox::list_page page;
    for (const auto& [id, owner] : w_.owner)
      if (owner == org && id.starts_with("sbx-")) page.items.push_back(w_.view(id));
    co_return page;
  }
  task<sandbox::sandbox_view> update(const std::string& org, const std::string& id, const sandbox::update_request&,
                                     const audit::actor& who) override {
    return one("sandboxes.update", org, id, who.name);
  }
  task<sandbox::sandbox_view> change_state(change c, const std::string& org, const std::string& id,
                                           const audit::actor& who) override {
    const char* names[] = {"stop", "start", "pause", "resume"};
    return one(std::string("sandboxes.") + names[static_cast<int>(c)], org, id, who.name);
  }
  task<void> remove(const std::string& org, const std::string& id, const audit::actor& who) override {
    w_.note("sandboxes.remove", org, id, who.name);
    co_return w_.owned(org, id);
  }
  task<sandbox::sandbox_metrics> metrics(const std::string& org, const std::string& id) override {
    w_.note("sandboxes.metrics", org, id);
    if (auto r = w_.owned(org, id); !r) co_return std::move(r).err();
    co_return sandbox::sandbox_metrics{};
  }
  result<sandbox::preview_link> preview(const std::string& org, const std::string& id, int port) override {
    w_.note("sandboxes.preview", org, id, std::to_string(port));
    if (auto r = w_.owned(org, id); !r) return std::move(r).err();
    return sandbox::preview_link{"http://8080-" + id + ".preview.localhost", "tok", "link"};
  }
  task<std::vector<sandbox::listening_port>> ports(const std::string& org, const std::string& id) override {
    w_.note("sandboxes.ports", org, id);
    if (auto r = w_.owned(org, id); !r) co_return std::move(r).err();
    co_return std::vector<sandbox::listening_port>{};
  }

 private:
  task<sandbox::sandbox_view> one(std::string what, const std::string& org, const std::string& id,
                                  const std::string& actor) {
    w_.note(std::move(what), org, id, actor);
    if (auto r = w_.owned(org, id); !r) co_return std::move(r).err();
    co_return w_.view(id);
  }
  world& w_;
};

class fake_commands final : public command_backend {
 public:
  explicit fake_commands(world& w) : w_(w) {}
  task<sandbox::exec_result> exec(const std::string& org, const std::string& id, sandbox::exec_request req,
                                  const audit::actor& who) override {
    w_.note("commands.exec", org, id, who.name);
    w_.last_exec = std::move(req);
    if (auto r = w_.owned(org, id); !r) co_return std::move(r).err();
    co_return w_.next_exec;
  }
  task<sandbox::exec_result> code_run(const std::string& org, const std::string& id, const sandbox::code_run_request&,
                                      const audit::actor& who) override {
    w_.note("commands.code_run", org, id, who.name);
    if (auto r = w_.owned(org, id); !r) co_return std::move(r).err();
    co_return w_.next_exec;
  }
  task<void> exec_stream(const std::string& org, const std::string& id, sandbox::exec_request,
                         sandbox::byte_sink&, const audit::actor& who) override {
    w_.note("commands.exec_stream", org, id, who.name);
    co_return w_.owned(org, id);
  }
  task<void> code_run_stream(const std::string& org, const std::string& id, const sandbox::code_run_request&,
                             sandbox::byte_sink&, const audit::actor& who) override {
    w_.note("commands.code_run_stream", org, id, who.name);
    co_return w_.owned(org, id);
  }
  // No agent here: a sandbox of the caller's is "not started", another's not found.
  task<sandbox::agent_session> connect_agent(const std::string& org, const std::string& id, const audit::actor& who,
                                             const audit::record*) override {
    w_.note("commands.connect_agent", org, id, who.name);
    if (auto r = w_.owned(org, id); !r) co_return std::move(r).err();
    co_return make_error(errc::conflict, "sandbox " + id + " is not started");
  }

 private:
  world& w_;
};

// Volumes and snapshots alike.
template <typename View, typename Create, typename Page>
class fake_named final : public named_resource_backend<View, Create, Page> {
 public:
  fake_named(world& w, std::string kind) : w_(w), kind_(std::move(kind)) {}
  task<View> create(const std::string& org, const Create& req, const audit::actor& who) override {
    w_.note(kind_ + ".create", org, req.name, who.name);
    co_return named(req.name);
  }
  result<Page> list(const std::string& org, const sandbox::name_page_request&) override {
    w_.note(kind_ + ".list", org);
    return Page{};
  }
  result<View> get(const std::string& org, const std::string& name) override {
    w_.note(kind_ + ".get", org, name);
    if (auto r = w_.owned(org, name); !r) return std::move(r).err();
    return named(name);
  }
  task<void> remove(const std::string& org, const std::string& name, const audit::actor& who) override {
    w_.note(kind_ + ".remove", org, name, who.name);
    co_return w_.owned(org, name);
  }

 private:
  static View named(const std::string& name) {
    View v;
    v.id = name + "-id";
    v.name = name;
    v.state = "ready";
    return v;
  }
  world& w_;
  std::string kind_;
};

class fake_identity final : public identity_backend {
 public:
  explicit fake_identity(world& w) : w_(w) {}
  result<store::org> find_org(const std::string& id_or_name) override {
    w_.note("identity.find_org", "", id_or_name);
    for (const auto& o : w_.orgs)
      if (o.id == id_or_name || o.name == id_or_name) return o;
    return make_error(errc::not_found, "organization " + id_or_name + " not found");
  }
  result<std::vector<store::org>> list_orgs() override {
    w_.note("identity.list_orgs", "");
    return w_.orgs;
  }
  result<store::org> create_org(const std::string& name, const std::string& actor_org, const audit::actor& who) override {
    w_.note("identity.create_org", actor_org, name, who.name);
    return store::org{"org-cccccccccccccccc", name, false, "2026-01-02T00:00:00.000Z", "active", std::nullopt};
  }
  result<void> set_org_state(const std::vector<std::string>&, const audit::actor& who, const std::string& org_id,
                             const std::string& state, const std::vector<std::string>&, const audit::record&) override {
    w_.note("identity.set_org_state", org_id, state, who.name);
    for (auto& o : w_.orgs)
      if (o.id == org_id) o.state = state;
    return {};
  }
  result<issued_key> issue_key(const std::vector<std::string>& chains, const audit::actor& who,
                               const std::string& org_id, const std::string& name, auth::role role,
                               std::int64_t expires_in_s) override {
    w_.note("identity.issue_key", org_id, name, who.name);
    w_.last_role = role;
    w_.calls.back().target += "/" + std::to_string(chains.size()) + "/" + std::to_string(expires_in_s);
    store::api_key k{"key-new", org_id, name, auth::to_string(role), "2026-01-02T00:00:00.000Z", {}, {}, {}};
    return issued_key{k, "sfk_secret"};
  }
  result<std::vector<store::api_key>> list_keys(const std::string& org_id) override {
    w_.note("identity.list_keys", org_id);
    std::vector<store::api_key> out;
    for (const auto& [id, owner] : w_.owner)
      if (owner == org_id && id.starts_with("key-"))
        out.push_back({id, owner, "k", "member", "2026-01-01T00:00:00.000Z", {}, {}, {}});
    return out;
  }
  result<void> revoke_key(const std::string& org_id, const std::string& key_id, const audit::actor& who) override {
    w_.note("identity.revoke_key", org_id, key_id, who.name);
    return w_.owned(org_id, key_id);
  }
  result<int> revoke_org_keys(const std::string& org_id, const audit::actor& who) override {
    w_.note("identity.revoke_org_keys", org_id, "", who.name);
    return 0;
  }
  result<auth::console_grant> open_console_session(const auth::principal& p, const std::string&,
                                                   const audit::actor& who) override {
    w_.note("identity.open_console_session", p.org_id, p.id, who.name);
    return auth::console_grant{std::string(64, 'c'), std::string(32, 'f'), "2026-01-02T08:00:00.000Z"};
  }
  result<void> close_console_session(const auth::principal& p, const audit::actor& who) override {
    w_.note("identity.close_console_session", p.org_id, p.id, who.name);
    return {};
  }
  std::vector<auth::console_issuer> console_issuers() override {
    return {{"0123456789abcdef", "Example IdP"}};
  }
  task<auth::login_redirect> start_console_login(const std::string& issuer_id, const std::string& redirect_uri,
                                                 const std::string& source, const std::string&) override {
    w_.note("identity.start_console_login", "", issuer_id, source);
    w_.last_redirect_uri = redirect_uri;
    if (issuer_id != "0123456789abcdef") co_return invalid_argument("no such issuer");
    co_return auth::login_redirect{"https://idp.example.test/authorize?state=s", std::string(64, 'b')};
  }
  task<auth::proven_identity> finish_console_login(const auth::login_callback& callback, const std::string&) override {
    w_.note("identity.finish_console_login", "", callback.state);
    w_.last_callback = callback;
    if (w_.login_failure) co_return *w_.login_failure;
    auth::principal p;
    p.org_id = org_a;
    p.org_name = "alpha";
    p.via = auth::method::oidc;
    p.id = "alice";
    p.issuer = "https://idp.example.test";
    p.granted = auth::role::member;
    co_return auth::proven_identity{p, std::chrono::system_clock::now() + std::chrono::minutes(10)};
  }
  result<auth::console_grant> open_identity_console_session(const auth::proven_identity& proven,
                                                            const audit::actor& who) override {
    w_.note("identity.open_identity_console_session", proven.who.org_id, proven.who.id, who.name);
    return auth::console_grant{std::string(64, 'd'), std::string(32, 'e'),
                               format_time(std::chrono::system_clock::now() + std::chrono::minutes(10))};
  }

 private:
  world& w_;
};

class fake_audit final : public audit_backend {
 public:
  explicit fake_audit(world& w) : w_(w) {}
  result<std::vector<audit::event_record>> events(const std::string& org, const store::audit_filter& f) override {
    w_.note("audit.events", org);
    w_.last_filter = f;
    std::vector<audit::event_record> out;
    for (const auto& e : w_.events)
      if (e.org_id == org && e.seq > f.after_seq && out.size() < f.limit) out.push_back(e);
    return out;
  }
  result<void> scan_events(const std::string& org, std::int64_t,
                           const std::function<bool(const audit::event_record&)>&) override {
    w_.note("audit.scan_events", org);
    return {};
  }
  result<std::vector<audit::checkpoint_record>> checkpoints(const std::string& org, std::int64_t,
                                                            std::size_t) override {
    w_.note("audit.checkpoints", org);
    return std::vector<audit::checkpoint_record>{};
  }
  // Inline: the fake has no other thread.
  asio::awaitable<result<nlohmann::json>> read_apart(std::function<result<nlohmann::json>(audit_reader&)> read) override {
    co_return read(*this);
  }
  asio::awaitable<result<checkpoint_now_result>> checkpoint_now(const std::string& org) override {
    w_.note("audit.checkpoint_now", org);
    co_return make_error(errc::conflict, "the audit chain of " + org + " has no events to sign yet");
  }

 private:
  world& w_;
};

class fake_guardrails final : public guardrail_backend {
 public:
  explicit fake_guardrails(world& w) : w_(w) {}
  result<sandbox::org_guardrails_view> guardrails(const std::string& org) override {
    w_.note("guardrails.get", org);
    return w_.guardrails(org);
  }
  result<sandbox::org_guardrails_view> set_limits(const std::string& org, const sandbox::limits_update& u,
                                                  const audit::actor& who) override {
    w_.note("guardrails.set_limits", org, "", who.name);
    w_.last_limits = u;
    return w_.guardrails(org);
  }
  task<sandbox::stop_all_report> stop_all(const std::string& org, bool, const audit::actor& who) override {
    w_.note("guardrails.stop_all", org, "", who.name);
    co_return sandbox::stop_all_report{};
  }
  result<void> lift_stop(const std::string& org, bool, const audit::actor& who) override {
    w_.note("guardrails.lift_stop", org, "", who.name);
    return {};
  }
  result<std::optional<proxy::egress_rule_set>> egress_defaults(const std::string& org) override {
    w_.note("guardrails.egress_defaults", org);
    return std::optional<proxy::egress_rule_set>();
  }
  result<std::optional<proxy::egress_rule_set>> set_egress_defaults(const std::string& org,
                                                                    const std::optional<proxy::egress_rule_set>& set,
                                                                    const audit::actor& who) override {
    w_.note("guardrails.set_egress_defaults", org, "", who.name);
    return set;
  }

 private:
  world& w_;
};

class fake_daemon final : public daemon_backend {
 public:
  explicit fake_daemon(world& w) : w_(w) {}
  task<void> ready() override {
    w_.note("daemon.ready", "");
    co_return ok_t{};
  }
  std::vector<sandbox::pool_status> pools() const override { return {}; }
  result<std::vector<std::pair<std::string, std::int64_t>>> sandboxes_by_state() override {
    w_.note("daemon.sandboxes_by_state", "");
    return std::vector<std::pair<std::string, std::int64_t>>{{"started", 1}};
  }

 private:
  world& w_;
};

class fake_secrets final : public secret_backend {
 public:
  explicit fake_secrets(world& w) : w_(w) {}
  result<secrets::secret_view> create(const std::string& org, const secrets::secret_create& req,
                                      const audit::actor& who) override {
    w_.note("secrets.create", org, req.name, who.name);
    return secrets::secret_view{req.name, req.hosts, req.placement, 1, "t", "t"};
  }
  result<std::vector<secrets::secret_view>> list(const std::string& org) override {
    w_.note("secrets.list", org);
    return std::vector<secrets::secret_view>{};
  }
  // A name ending in "-b" is organization B's: not found for anyone else, as the store scopes it.
  result<secrets::secret_view> get(const std::string& org, const std::string& name) override {
    w_.note("secrets.get", org, name);
    return mine(org, name);
  }
  result<secrets::secret_view> rotate(const std::string& org, const std::string& name, const secrets::secret_rotate&,
                                      const audit::actor& who) override {
    w_.note("secrets.rotate", org, name, who.name);
    return mine(org, name);
  }
  result<void> remove(const std::string& org, const std::string& name, const audit::actor& who) override {
    w_.note("secrets.remove", org, name, who.name);
    auto found = mine(org, name);
    if (!found) return std::move(found).err();
    return {};
  }
  result<int> remove_all(const std::string& org, const audit::actor& who) override {
    w_.note("secrets.remove_all", org, "", who.name);
    return 0;
  }
  result<std::string> interception_ca_pem(const std::string& org) override {
    w_.note("secrets.interception_ca", org);
    return std::string("-----BEGIN CERTIFICATE-----\n");
  }

 private:
  static result<secrets::secret_view> mine(const std::string& org, const std::string& name) {
    if (name.ends_with("-b") && org != org_b) return make_error(errc::not_found, "secret '" + name + "' not found");
    return secrets::secret_view{name, {"a.example"}, {}, 1, "t", "t"};
  }
  world& w_;
};

class fake_webhooks final : public webhook_backend {
 public:
  explicit fake_webhooks(world& w) : w_(w) {}
  task<webhooks::webhook_with_secret> create(const std::string& org, const webhooks::webhook_create& req,
                                             const audit::actor& who) override {
    w_.note("webhooks.create", org, req.url, who.name);
    webhooks::webhook_view v;
    v.id = "whk-1";
    v.url = req.url;
    v.types = req.types;
    co_return webhooks::webhook_with_secret{v, "whsec_x"};
  }
  result<std::vector<webhooks::webhook_view>> list(const std::string& org) override {
    w_.note("webhooks.list", org);
    return std::vector<webhooks::webhook_view>{};
  }
  // An id ending in "-b" is organization B's: not found for anyone else, as the store scopes it.
  result<webhooks::webhook_view> get(const std::string& org, const std::string& id) override {
    w_.note("webhooks.get", org, id);
    return mine(org, id);
  }
  task<webhooks::webhook_view> update(const std::string& org, const std::string& id, const webhooks::webhook_patch&,
                                      const audit::actor& who) override {
    w_.note("webhooks.update", org, id, who.name);
    co_return mine(org, id);
  }
  result<void> remove(const std::string& org, const std::string& id, const audit::actor& who) override {
    w_.note("webhooks.remove", org, id, who.name);
    auto found = mine(org, id);
    if (!found) return std::move(found).err();
    return {};
  }
  result<webhooks::webhook_with_secret> rotate_secret(const std::string& org, const std::string& id, std::int64_t,
                                                      const audit::actor& who) override {
    w_.note("webhooks.rotate_secret", org, id, who.name);
    auto found = mine(org, id);
    if (!found) return std::move(found).err();
    return webhooks::webhook_with_secret{*found, "whsec_y"};
  }
  result<webhooks::delivery_page> deliveries(const std::string& org, const std::string& id, std::int64_t,
                                             std::size_t) override {
    w_.note("webhooks.deliveries", org, id);
    auto found = mine(org, id);
    if (!found) return std::move(found).err();
    return webhooks::delivery_page{};
  }
  result<int> remove_all(const std::string& org, const audit::actor& who) override {
    w_.note("webhooks.remove_all", org, "", who.name);
    return 0;
  }

 private:
  static result<webhooks::webhook_view> mine(const std::string& org, const std::string& id) {
    if (id.ends_with("-b") && org != org_b) return make_error(errc::not_found, "webhook " + id + " not found");
    webhooks::webhook_view v;
    v.id = id;
    return v;
  }
  world& w_;
};

inline rate_limits_config no_rate_limits() {
  rate_limits_config off;
  off.viewer = off.member = off.admin = off.superadmin = off.org = rate_limit{0, 0};
  return off;
}

// Everything make_handler and make_stream_selector are given, over the fakes.
struct fake_backends {
  world w;
  config cfg;
  system_clock clk;
  fake_gate gate{w};
  fake_sandboxes sandboxes{w};
  fake_commands commands{w};
  fake_named<sandbox::volume_view, sandbox::volume_create_request, sandbox::volume_page> volumes{w, "volumes"};
  fake_named<sandbox::snapshot_view, sandbox::snapshot_create_request, sandbox::snapshot_page> snapshots{w, "snapshots"};
  fake_identity identity{w};
  fake_audit audit{w};
  fake_guardrails guardrails{w};
  fake_daemon daemon{w};
  fake_secrets secrets{w};
  fake_webhooks webhooks{w};
  testing::temp_dir dir;
  audit::signing_key key = audit::signing_key::load_or_create(dir.file("audit.key")).value();
  rate_limiter limiter{no_rate_limits(), clk};
  sandbox::answer_workers workers{1};
  event_hub events;
  dependencies deps{cfg,   gate,       sandboxes, commands, volumes, snapshots, identity,
                    audit, guardrails, daemon,    secrets,  webhooks, key,     limiter,   workers,  events};
};

}  // namespace sandfort::api::test
