// sandfortd: wiring only — flags, configuration, objects, the io_context.
#include <CLI/CLI.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <iostream>
#include <malloc.h>
#include <optional>
#include <spdlog/spdlog.h>
#include <string_view>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_backends.hpp"
#include "audit_verify.hpp"
#include "checkpoint_loop.hpp"
#include "e2b_tokens.hpp"
#include "history_loop.hpp"
#include "logging.hpp"
#include "storage_backup.hpp"
#include "sandfort/api/api.hpp"
#include "sandfort/api/client_address.hpp"
#include "sandfort/audit/group_writer.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/audit/signing.hpp"
#include "sandfort/store/secret_store.hpp"
#include "sandfort/store/webhook_store.hpp"
#include "sandfort/secrets/tls_interception.hpp"
#include "secret_backend.hpp"
#include "secret_injection.hpp"
#include "sandfort/auth/keys.hpp"
#include "sandfort/compat/e2b/e2b.hpp"
#include "sandfort/docker/unix_engine.hpp"
#include "sandfort/firewall/host_firewall.hpp"
#include "sandfort/http/server.hpp"
#include "sandfort/http/tls_front.hpp"
#include "sandfort/preview/server.hpp"
#include "sandfort/proxy/proxy.hpp"
#include "sandfort/home/door.hpp"
#include "sandfort/home/pool.hpp"
#include "sandfort/sandbox/gvisor_preload.hpp"
#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/store_lookups.hpp"
#include "sandfort/sandbox/service.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/version.hpp"
#include "sandfort/webhooks/dispatcher.hpp"

extern char** environ;

namespace {

namespace asio = boost::asio;
using namespace sandfort;

struct config_flags {
  std::string file;
  std::string listen;
  std::string state_dir;
  std::vector<std::string> sets;  // key=value
};

void add_config_flags(CLI::App* cmd, config_flags& f) {
  cmd->add_option("-c,--config", f.file, "JSON configuration file (see docs/configuration.md)");
  cmd->add_option("--listen", f.listen, "API listen address HOST:PORT");
  cmd->add_option("--state-dir", f.state_dir, "state directory (database, per-sandbox directories)");
  cmd->add_option("--set", f.sets, "override any setting: --set key=value (e.g. max_resources.cpus=2)");
}

std::string executable_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

// Loads all layers and fails loudly: a daemon must not start on a half-understood config.
config load_or_exit(const config_flags& f) {
  config_overrides overrides;
  for (const auto& kv : f.sets) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--set expects key=value, got '" + kv + "'");
    overrides[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!f.listen.empty()) overrides["listen"] = f.listen;
  if (!f.state_dir.empty()) overrides["state_dir"] = f.state_dir;
  auto cfg = load_config(f.file, overrides, environ);
  if (!cfg) throw std::runtime_error(cfg.err().message);
  if (auto r = finalize_config(*cfg, executable_dir()); !r) throw std::runtime_error(r.err().message);
  bool fresh = !std::filesystem::exists(cfg->state_dir);
  std::filesystem::create_directories(cfg->state_dir);
  if (fresh) std::filesystem::permissions(cfg->state_dir, std::filesystem::perms::owner_all);
  return std::move(cfg).value();
}

// The state directory holds the database (key hashes, the audit chain) and, with scripts/run,
// the admin key: no other host user may traverse it, whatever umask made it. Tightens what this
// user owns (0700, database files 0600) and says what it changed or could not.
std::vector<std::string> secure_state(const config& cfg) {
  std::vector<std::string> notes;
  auto tighten = [&](const std::string& path, mode_t wanted) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || (st.st_mode & 077) == 0) return;
    auto was = fmt::format("{:04o}", st.st_mode & 07777);
    if (st.st_uid != ::geteuid())
      notes.push_back(fmt::format("{} is mode {} and owned by uid {}: other host users can read it; make it {:04o}",
                                  path, was, st.st_uid, wanted));
    else if (::chmod(path.c_str(), wanted) != 0)
      notes.push_back(fmt::format("{} is mode {} and chmod failed: {}", path, was, std::strerror(errno)));
    else
      notes.push_back(fmt::format("{} was mode {}; now {:04o} (other host users must not read it)", path, was, wanted));
  };
  tighten(cfg.state_dir, 0700);
  // SQLite gives its -wal and -shm files the database's mode, so a new database starts as 0600.
  if (int fd = ::open(cfg.database.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600); fd >= 0) ::close(fd);
  for (const char* suffix : {"", "-wal", "-shm"}) tighten(cfg.database + suffix, 0600);
  return notes;
}

std::unique_ptr<store::database> open_store(const config& cfg) {
  auto db = store::database::open(cfg.database);
  if (!db) throw std::runtime_error(db.err().message);
  return std::move(db).value();
}

int admin_bootstrap(const config_flags& f) {
  auto cfg = load_or_exit(f);
  for (const auto& note : secure_state(cfg)) std::cerr << "sandfortd: " << note << "\n";
  auto db = open_store(cfg);
  system_clock clk;
  auto issued = auth::bootstrap(*db, clk);
  if (!issued) {
    std::cerr << "sandfortd: " << issued.err().message << "\n";
    return issued.err().code == errc::conflict ? 3 : 1;
  }
  // The only time the secret is ever shown.
  std::cout << issued->secret << std::endl;
  std::cerr << "superadmin organization created; the key above is shown once (id " << issued->record.id << ")\n";
  return 0;
}

// Retries until Docker answers: reconciliation must happen before sandboxes are trusted, but
// a daemon started before Docker should come up and report not-ready rather than exit.
asio::awaitable<void> reconcile_until_done(sandbox::service& svc) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    auto r = co_await svc.reconciliation().reconcile();
    if (r) co_return;
    spdlog::warn("reconcile failed ({}); retrying in 5 s", r.err().message);
    timer.expires_after(std::chrono::seconds(5));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

// The sandbox network must exist before anything else about sandboxes; Docker may not be up yet.
asio::awaitable<result<docker::network_info>> prepare_network_until_done(sandbox::service& svc) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    auto net = co_await svc.network().prepare();
    // An unsafe network of our name is for the operator to fix, not to wait out.
    if (net || net.err().code != errc::unavailable) co_return net;
    spdlog::warn("sandbox network: {}; retrying in 5 s", net.err().message);
    timer.expires_after(std::chrono::seconds(5));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return std::move(net).err();
  }
}

result<proxy::proxy_options> egress_options(const config& cfg) {
  proxy::proxy_options o;
  auto ranges = proxy::parse_cidr_list(cfg.egress.allowed_ranges);
  if (!ranges) return make_error(errc::invalid_argument, "config: egress.allowed_ranges: " + ranges.err().message);
  o.allowed_ranges = std::move(ranges).value();
  o.connect_timeout = std::chrono::seconds(cfg.egress.connect_timeout_s);
  o.idle_timeout = std::chrono::seconds(cfg.egress.idle_timeout_s);
  o.max_tunnels_per_sandbox = static_cast<std::size_t>(cfg.egress.max_tunnels_per_sandbox);
  o.max_pending_per_source = static_cast<std::size_t>(cfg.egress.max_pending_per_source);
  o.max_pending = static_cast<std::size_t>(cfg.egress.max_pending);
  o.max_tunnels = static_cast<std::size_t>(cfg.egress.max_tunnels);
  if (!cfg.egress.upstream_proxy.empty()) {
    const auto& text = cfg.egress.upstream_proxy;
    auto colon = text.rfind(':');
    auto host = text.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    o.upstream_proxy = proxy::upstream_proxy_options{host, static_cast<unsigned short>(std::stoi(text.substr(colon + 1))),
                                                     cfg.egress.upstream_proxy_username,
                                                     cfg.egress.upstream_proxy_password};
  }
  return o;
}

asio::awaitable<void> reap_forever(sandbox::admission& admission, bool& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopping) {
    timer.expires_after(std::chrono::seconds(5));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!stopping) co_await admission.reap();
  }
}

asio::awaitable<void> check_disk_forever(sandbox::disk_guard& disk, int interval_s, bool& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopping) {
    // From the end of one round: a round slower than the interval never overlaps the next.
    timer.expires_after(std::chrono::seconds(interval_s));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!stopping) co_await disk.check();
  }
}

// Rules this process created go with it, but only when no sandbox is left on the network: a
// sandbox that outlives the daemon must not find the host open.
asio::awaitable<void> remove_firewall_if_unused(docker::engine& engine, const std::string& network,
                                               firewall::firewall_worker& worker,
                                               std::optional<firewall::host_firewall>& fw) {
  if (!fw || !fw->created()) co_return;
  auto net = co_await engine.inspect_network(network);
  if (net && !net->containers.empty()) {
    spdlog::info("host firewall rules stay: {} sandbox containers remain on {}", net->containers.size(), network);
    co_return;
  }
  if (auto r = co_await worker.remove(*fw); !r) spdlog::warn("host firewall: {}", r.err().message);
}

// Every connection costs a descriptor, and the caps (max_connections, egress.max_pending,
// egress.max_tunnels) assume more than the usual soft limit of 1024: raise it to the hard limit.
void raise_descriptor_limit() {
  constexpr rlim_t enough = 65536;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  rlim_t want = lim.rlim_max == RLIM_INFINITY ? enough : std::min(lim.rlim_max, enough);
  if (want > lim.rlim_cur) {
    rlimit raised{want, lim.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim.rlim_cur = want;
  }
  spdlog::info("open file limit: {} (hard limit {})", static_cast<unsigned long long>(lim.rlim_cur),
               lim.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(lim.rlim_max));
}

int serve(const config_flags& f) {
  // Large blocks (agent answers, their parsed and encoded forms: megabytes each) are mapped on
  // their own and unmapped when freed, so the daemon's memory follows the answers' budget. With
  // glibc's sliding threshold (up to 32 MiB) they come from a heap after the first one is freed,
  // grow by copying, and what they leave stays resident (bench/large_answers.py).
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  auto cfg = load_or_exit(f);
  daemon::setup_logging(cfg.log_format, cfg.log_level);
  for (const auto& note : secure_state(cfg)) spdlog::warn("state: {}", note);
  raise_descriptor_limit();
  if (!std::filesystem::exists(cfg.agent_path))
    throw std::runtime_error("sandbox agent not found at " + cfg.agent_path + " (set agent_path)");
  if (!cfg.gvisor_runtime.empty())
    if (auto r = sandbox::install_gvisor_preload(cfg); !r) throw std::runtime_error("gVisor: " + r.err().message);
  auto db = open_store(cfg);
  // Serving: a write lock held by an admin command must not stall every tenant's requests.
  db->set_busy_timeout(std::chrono::milliseconds(20));
  const store::space_policy space{cfg.store.min_free_mb << 20, cfg.store.reserve_mb << 20};
  if (auto r = db->set_space_policy(space); !r)
    spdlog::warn("store: {}; tried again every maintenance round", r.err().message);
  spdlog::info("sandfortd {} starting: store {}, state {}, instance {}", sandfort::version, cfg.database, cfg.state_dir,
               db->instance_id());

  asio::io_context ioc(1);
  system_clock clk;
  auto docker_engine = docker::make_unix_engine(
      {cfg.docker_socket, std::chrono::seconds(cfg.docker_timeout_s), std::chrono::seconds(cfg.pull_timeout_s)});
  docker::engine& engine = *docker_engine;
  sandbox::connector_options agent_opts;
  agent_opts.response_budget_bytes = cfg.agent_response_budget_mb << 20;
  agent_opts.idle_timeout = std::chrono::seconds(cfg.agent_keepalive_s);
  // After ioc (they post results to it), before what uses them: large exec answers are parsed
  // and encoded there, never on the I/O thread.
  sandbox::answer_workers answer_workers(2);
  sandbox::container_connector agent(engine, answer_workers, agent_opts);
  // Read once here: a host whose memory cannot be told would admit nothing (docs/limits.md).
  sandbox::proc_meminfo host_memory;
  auto host_total = host_memory.total_mb();
  if (!host_total) throw std::runtime_error("host memory: " + host_total.err().message);
  spdlog::info("host memory: sandboxes may hold {} MiB together ((MemTotal {} MiB − reserve {} MiB) × over-commit {})",
               sandbox::sandbox_memory_capacity_mb(*host_total, cfg.host), *host_total, cfg.host.memory_reserve_mb,
               cfg.host.memory_overcommit);
  // The events of commands run in sandboxes, in group commits on a thread and connection of
  // their own (audit/group_writer.hpp). After ioc (it posts to it), before what appends through it.
  auto command_events = audit::group_writer::open(cfg.database, clk);
  if (!command_events) throw std::runtime_error("audit: " + command_events.err().message);
  sandbox::service sandboxes(ioc.get_executor(), cfg, *db, engine, agent, clk, **command_events, &host_memory);

  auto audit_key = audit::signing_key::load_or_create(cfg.audit.key_path);
  if (!audit_key) throw std::runtime_error("audit: " + audit_key.err().message);
  spdlog::info("audit: checkpoints signed with key {} ({})", audit_key->key_id(), cfg.audit.key_path);
  // Before anything serves: a key file others may read stops the daemon here (docs/secrets.md).
  auto secrets_key = secrets::sealing_key::load_or_create(cfg.secrets.key_file);
  if (!secrets_key) throw std::runtime_error("secrets: " + secrets_key.err().message);
  auto foreign = store::secret_store(*db).count_sealed_by_other(secrets_key->key_id());
  if (!foreign) throw std::runtime_error("secrets: " + foreign.err().message);
  // Webhook signing secrets are sealed with the same key.
  auto foreign_webhooks = store::webhook_store(*db).count_sealed_by_other(secrets_key->key_id());
  if (!foreign_webhooks) throw std::runtime_error("secrets: " + foreign_webhooks.err().message);
  *foreign += *foreign_webhooks;
  if (*foreign > 0)
    throw std::runtime_error("secrets: the database holds " + std::to_string(*foreign) +
                             " value(s) sealed with another key than " + cfg.secrets.key_file + " (key " +
                             secrets_key->key_id() + "): put back the key file that sealed them (docs/operations.md)");
  spdlog::info("secrets: values sealed with key {} ({})", secrets_key->key_id(), cfg.secrets.key_file);
  audit::journal journal(*db, clk);
  audit::failure_summary auth_failures(*db, journal, clk);
  audit::egress_summary egress_decisions(*db, journal, clk);
  audit::rate_limit_summary rate_refusals(*db, journal, clk);
  api::rate_limiter limiter(cfg.guardrails.rate_limits, clk);
  // After ioc: destroyed first, so that no read finishing at shutdown posts to a dead io_context.
  auto reader = api::background_reader::open(cfg.database, 4);
  if (!reader) throw std::runtime_error("store: " + reader.err().message);

  auth::oidc_verifier oidc(cfg.oidc, *db, clk, auth::network_fetcher(std::chrono::seconds(cfg.oidc.fetch_timeout_s)));
  auth::authenticator authn(*db, clk, &oidc);
  for (const auto& is : cfg.oidc.issuers)
    spdlog::info("oidc: accepting tokens of {}{}", is.issuer,
                 is.console_client_id.empty() ? "" : "; console sign-in as client " + is.console_client_id);
  auth::console_login console_login(cfg.oidc, oidc, *db, clk,
                                    auth::network_poster(std::chrono::seconds(cfg.oidc.fetch_timeout_s)));

  http::server_options options;
  options.body_limit = cfg.max_body_bytes;
  options.header_timeout = std::chrono::seconds(cfg.header_timeout_s);
  options.idle_timeout = std::chrono::seconds(cfg.idle_timeout_s);
  options.max_connections = static_cast<std::size_t>(cfg.max_connections);
  options.max_idle_per_source = static_cast<std::size_t>(cfg.max_idle_connections_per_source);
  options.max_idle = static_cast<std::size_t>(cfg.max_idle_connections);
  options.listener_name = "api";
  options.log_warning = [](const std::string& line) { spdlog::warn("{}", line); };
  // Who each request comes from: the TLS front's clients and trusted proxies' X-Forwarded-For.
  auto trusted_proxies = proxy::parse_cidr_list(cfg.trusted_proxies);
  if (!trusted_proxies) throw std::runtime_error("trusted_proxies: " + trusted_proxies.err().message);
  api::client_addresses clients(std::move(*trusted_proxies));
  options.client_address = [&clients](const http::peer& from, std::string_view forwarded_for) {
    return clients.resolve(from, forwarded_for);
  };
  // Before a header is read only the peer is known: a trusted proxy's connections count in the
  // total of idle connections, not against one source (docs/security.md).
  auto connection_source = [&clients](const http::peer& from) { return clients.connection_source(from); };
  options.idle_source = connection_source;
  // Webhooks (docs/events.md): the delivery worker, and the resolver that checks a URL's host when
  // one is registered (deliveries resolve again, and check every address, each attempt).
  webhooks::dispatcher_options webhook_opts;
  {
    auto ranges = proxy::parse_cidr_list(cfg.webhooks.allowed_ranges);
    if (!ranges) throw std::runtime_error("config: webhooks.allowed_ranges: " + ranges.err().message);
    webhook_opts.allowed_ranges = std::move(*ranges);
    webhook_opts.concurrency = static_cast<std::size_t>(cfg.webhooks.concurrency);
    webhook_opts.timeout = std::chrono::seconds(cfg.webhooks.timeout_s);
    webhook_opts.poll_interval = std::chrono::milliseconds(cfg.webhooks.poll_interval_ms);
    webhook_opts.log_retention = std::chrono::seconds(cfg.webhooks.log_retention_s);
    webhook_opts.retry = {std::chrono::milliseconds(cfg.webhooks.retry_base_ms),
                          std::chrono::milliseconds(cfg.webhooks.retry_max_ms),
                          std::chrono::seconds(cfg.webhooks.max_age_s)};
  }
  webhooks::dispatcher webhook_worker(ioc.get_executor(), webhook_opts, *db, *secrets_key, clk);
  proxy::system_resolver webhook_resolver;
  daemon::api_backends backends(
      {cfg, *db, sandboxes, clk, authn, journal, *audit_key, auth_failures, rate_refusals, **reader, console_login,
       *secrets_key, webhook_resolver, webhook_worker});
  // The E2B-compatible endpoints (docs/e2b.md): their routes join the registry before it is read.
  daemon::e2b_tokens e2b_access_tokens(*db, clk);
  if (cfg.e2b.enabled) compat::e2b::register_routes(&e2b_access_tokens);
  // GET /v1/events wakes when an audit chain grows: the store tells the hub of each committed append.
  api::event_hub event_streams;
  event_streams.also_tell([&webhook_worker](const std::string& org_id, std::int64_t) { webhook_worker.wake(org_id); });
  db->observe_appends(&event_streams);
  (*command_events)->observe_appends(&event_streams, ioc.get_executor());
  struct observer_detach {  // before the hub goes: appends after this point tell nobody
    store::database& db;
    audit::group_writer& commands;
    ~observer_detach() {
      db.observe_appends(nullptr);
      commands.observe_appends(nullptr, {});
    }
  } detach_event_streams{*db, **command_events};
  const api::dependencies api_deps = backends.dependencies(limiter, answer_workers, event_streams);
  http::server server(ioc, options, api::make_handler(api_deps));
  server.set_stream_selector(api::make_stream_selector(api_deps));

  auto proxy_opts = egress_options(cfg);
  if (!proxy_opts) throw std::runtime_error(proxy_opts.err().message);
  // Secrets (docs/secrets.md): the proxy opens a sandbox's secrets for each request, and
  // intercepts HTTPS with its organization's CA; the real upstreams are verified against
  // secrets.upstream_ca_file or the system trust store (a trust store that does not load stops
  // the daemon here rather than failing every intercepted connection).
  sandbox::egress_lookup egress_directory(*db, [&](const std::string& org_id, const std::string& name) {
    return daemon::open_secret(*db, *secrets_key, org_id, name);
  });
  proxy::system_resolver resolver;
  proxy::egress_proxy egress(ioc, *proxy_opts, egress_directory, resolver);
  daemon::interception_authorities interception_cas(*db, *secrets_key);
  auto upstream_tls = secrets::make_upstream_context({cfg.secrets.upstream_ca_file});
  if (!upstream_tls) throw std::runtime_error("secrets: " + upstream_tls.err().message);
  egress.enable_interception(interception_cas, *upstream_tls);
  auto ca_source = daemon::make_secret_backend(cfg, *db, journal, clk, *secrets_key);
  sandboxes.set_interception_ca([&ca_source](const std::string& org_id) { return ca_source->interception_ca_pem(org_id); });
  sandbox::preview_lookup preview_directory(*db, &sandboxes.activity());
  preview::preview_options preview_opts;
  preview_opts.domain = cfg.preview.domain;
  preview_opts.max_connections = static_cast<std::size_t>(cfg.preview.max_connections);
  preview_opts.max_idle_per_source = static_cast<std::size_t>(cfg.preview.max_idle_connections_per_source);
  preview_opts.max_idle = static_cast<std::size_t>(cfg.preview.max_idle_connections);
  preview_opts.idle_source = connection_source;
  preview_opts.header_timeout = std::chrono::seconds(cfg.header_timeout_s);
  preview_opts.forwarded_proto = cfg.tls.enabled() ? "https" : "http";
  // Only the TLS front's client: the preview router appends it to X-Forwarded-For itself, after
  // whatever a proxy in front wrote (the app behind it gets the whole chain).
  preview_opts.client_address = [&clients](const http::peer& from, std::string_view) {
    return clients.resolve(from, {});
  };
  // A sandbox with no address (it dials home): its agent connects to the port on its loopback.
  preview_opts.open_port = [&agent](const std::string& sandbox_id,
                                    unsigned short port) -> asio::awaitable<result<http::any_stream>> {
    const sandbox::agent_address at{sandbox_id, {}, true};
    auto opening = sandbox::open_port(agent, at, port);
    co_return co_await std::move(opening);
  };
  preview::preview_server previews(ioc, preview_opts, preview_directory);
  // Sandboxes that dial home (gVisor): a door each (src/home), their idle links, and their
  // tunnels handed to the egress proxy with the sandbox the door proved.
  home::link_pool home_links;
  home::doors home_doors(ioc, {sandbox::home_root(cfg)}, home_links,
                         [&egress](const std::string& id, http::any_stream link) {
                           return egress.serve_link(id, std::move(link));
                         });
  agent.serve_home(home_doors, home_links);
  // A stopped or deleted sandbox's tunnels and preview relays close at once.
  sandboxes.network().on_disconnect([&](const std::string& id) {
    egress.disconnect(id);
    previews.disconnect(id);
  });
  egress.on_decision([&](const proxy::egress_event& ev) {
    egress_decisions.note({ev.org_id, ev.sandbox_id, ev.host, ev.port, ev.decision == "allow", ev.reason, ev.source,
                           ev.bytes_in, ev.bytes_out, ev.injected});
  });
  sandboxes.set_egress_meter([&](const std::string& id) {
    auto t = egress.sandbox_traffic(id);
    return t ? sandbox::egress_traffic{t->bytes_in, t->bytes_out, t->allowed, t->denied} : sandbox::egress_traffic{};
  });
  firewall::process_runner runner;
  std::optional<firewall::host_firewall> host_firewall;
  // iptables runs there, never on the I/O thread. Declared after host_firewall: it is joined
  // before the rules object it may still be using goes away.
  firewall::firewall_worker firewall_thread;
  std::string network_name = cfg.network.name;

  // Ends the Docker event follower on SIGTERM.
  asio::cancellation_signal stop_following_events;
  int exit_code = 0;
  bool stopping = false;
  auto fatal = [&](const std::string& what) {
    spdlog::critical("{}", what);
    exit_code = 1;
    ioc.stop();
  };
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
      if (auto v = co_await engine.version(); v)
        spdlog::info("docker engine {} (API {})", v->version, v->api_version);
      else
        spdlog::warn("docker: {}", v.err().message);
      auto net = co_await prepare_network_until_done(sandboxes);
      if (!net) {
        fatal("sandbox network: " + net.err().message);
        co_return;
      }
      // Containers that die or vanish behind our back: followed from before reconciliation on.
      asio::co_spawn(ioc, sandboxes.reconciliation().follow_container_events(),
                     asio::bind_cancellation_slot(stop_following_events.slot(), asio::detached));
      auto proxy_port = static_cast<unsigned short>(cfg.egress.proxy_port);
      if (cfg.network.host_firewall) {
        host_firewall.emplace(runner, firewall::rule_set{net->bridge, net->gateway, proxy_port});
        if (auto r = co_await firewall_thread.install(*host_firewall); !r) {
        fatal("host firewall: " + r.err().message);
        co_return;
      }
        spdlog::info("host firewall: from {} only {}:{} answers", net->bridge, net->gateway, proxy_port);
      } else {
        spdlog::warn("network.host_firewall is off: sandboxes can reach every service listening on this host");
      }
      auto bound = egress.listen(net->gateway + ":" + std::to_string(proxy_port));
      if (!bound) {
        fatal("egress proxy: " + bound.err().message);
        co_return;
      }
      spdlog::info("egress proxy listening on {}:{}", net->gateway, *bound);
      // Before any create (creates wait for reconciliation): hard disk enforcement or measured.
      if (auto d = co_await sandboxes.disk().detect_enforcement(); !d)
        spdlog::warn("disk: could not ask Docker about its storage ({}); disk_mb measured and enforced by stopping",
                     d.err().message);
      co_await reconcile_until_done(sandboxes);
      if (!stopping) sandboxes.start_pool();
  }, asio::detached);

  // With TLS, `listen` is the TLS front's and the API listener takes a loopback port of its own.
  // The same certificate serves previews, so it must cover *.<preview.domain> as well.
  std::optional<http::tls_front> tls, preview_tls;
  // The front holds the server's connections (as relays) plus those still in their handshake: its
  // cap leaves room for max_idle of those beyond the server's own.
  auto make_front = [&](std::optional<http::tls_front>& front, const char* name, int max_connections,
                        int max_idle_per_source, int max_idle) {
    http::tls_front_options tls_opts;
    tls_opts.cert_file = cfg.tls.cert_file;
    tls_opts.key_file = cfg.tls.key_file;
    tls_opts.max_connections = static_cast<std::size_t>(max_connections) + static_cast<std::size_t>(max_idle);
    tls_opts.max_idle_per_source = static_cast<std::size_t>(max_idle_per_source);
    tls_opts.max_idle = static_cast<std::size_t>(max_idle);
    tls_opts.idle_source = [&clients](const std::string& address) {
      return clients.connection_source(http::peer{address, 0});
    };
    tls_opts.handshake_timeout = std::chrono::seconds(cfg.header_timeout_s);
    tls_opts.write_timeout = std::chrono::seconds(cfg.idle_timeout_s);
    tls_opts.listener_name = name;
    tls_opts.log_warning = options.log_warning;
    tls_opts.relay_opened = [&clients](unsigned short port, const std::string& client) {
      clients.relay_opened(port, client);
    };
    tls_opts.relay_closed = [&clients](unsigned short port) { clients.relay_closed(port); };
    front.emplace(ioc, std::move(tls_opts));
    if (auto r = front->reload(); !r) throw std::runtime_error(r.err().message);
  };
  if (cfg.tls.enabled()) {
    make_front(tls, "api (TLS)", cfg.max_connections, cfg.max_idle_connections_per_source, cfg.max_idle_connections);
    make_front(preview_tls, "preview (TLS)", cfg.preview.max_connections, cfg.preview.max_idle_connections_per_source,
               cfg.preview.max_idle_connections);
  }
  auto port = server.listen_tcp(tls ? "127.0.0.1:0" : cfg.listen);
  if (!port) throw std::runtime_error(port.err().message);
  auto preview_port = previews.listen(preview_tls ? "127.0.0.1:0" : cfg.preview.listen);
  if (!preview_port) throw std::runtime_error("preview listener: " + preview_port.err().message);
  if (tls) {
    auto tls_port = tls->listen(cfg.listen, *port);
    if (!tls_port) throw std::runtime_error(tls_port.err().message);
    spdlog::info("listening on {} (port {}, TLS: {})", cfg.listen, *tls_port, tls->describe());
    auto preview_tls_port = preview_tls->listen(cfg.preview.listen, *preview_port);
    if (!preview_tls_port) throw std::runtime_error("preview listener: " + preview_tls_port.err().message);
    spdlog::info("preview listener on {} (port {}, TLS, *.{})", cfg.preview.listen, *preview_tls_port,
                 cfg.preview.domain);
  } else {
    spdlog::info("listening on {} (port {})", cfg.listen, *port);
    spdlog::info("preview listener on {} (port {}, *.{})", cfg.preview.listen, *preview_port, cfg.preview.domain);
  }
  asio::co_spawn(ioc, reap_forever(sandboxes.admission(), stopping), asio::detached);
  asio::co_spawn(ioc, webhook_worker.run(), asio::detached);
  asio::co_spawn(ioc, check_disk_forever(sandboxes.disk(), cfg.disk.check_interval_s, stopping), asio::detached);
  asio::co_spawn(ioc, daemon::checkpoint_forever(*db, **reader, *audit_key, clk, cfg.audit, stopping), asio::detached);
  asio::co_spawn(ioc, daemon::keep_history_bounded(*db, clk, cfg.store, stopping), asio::detached);
  const daemon::summaries counted{auth_failures, egress_decisions, rate_refusals};
  asio::co_spawn(ioc, daemon::summarize_forever(counted, cfg.audit, stopping), asio::detached);

  // SIGHUP: the TLS certificate and key are read again (renewed certificates without a restart).
  asio::signal_set reload_signals(ioc, SIGHUP);
  std::function<void()> await_reload = [&] {
    reload_signals.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (!tls) {
        spdlog::info("SIGHUP: nothing to reload (no tls configured)");
      } else if (auto r = tls->reload(); !r) {
        spdlog::error("SIGHUP: {}; still serving the previous certificate", r.err().message);
      } else {
        (void)preview_tls->reload();  // the same files, just read
        spdlog::info("SIGHUP: TLS certificate reloaded: {}", tls->describe());
      }
      await_reload();
    });
  };
  await_reload();

  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: no new connections; finishing in-flight requests", sig);
    stopping = true;
    reload_signals.cancel();
    if (tls) tls->stop();
    if (preview_tls) preview_tls->stop();
    stop_following_events.emit(asio::cancellation_type::terminal);
    event_streams.close_all();  // open event streams end now (clients resume by Last-Event-ID)
    webhook_worker.stop();      // no new attempt; one in flight is made again after the restart
    server.stop();
    previews.stop();
    egress.stop();
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        co_await server.drain(std::chrono::seconds(cfg.shutdown_grace_s));
        co_await sandboxes.drain_pool();
        daemon::summarize_once(counted);
        daemon::checkpoint_once(*db, *audit_key, clk, cfg.audit);  // the requests that finished last
        co_await remove_firewall_if_unused(engine, network_name, firewall_thread, host_firewall);
        spdlog::info("stopped");
        ioc.stop();
    }, asio::detached);
  });
  ::signal(SIGPIPE, SIG_IGN);
  ioc.run();
  return exit_code;
}

// `sandfortd routes`: the registry the API serves, read from the code and nothing else (no
// configuration, no database, no Docker).
int print_routes(bool as_json) {
  compat::e2b::register_routes(nullptr);  // listed whatever e2b.enabled says: the code's registry
  const auto routes = api::describe_routes();
  if (as_json) {
    std::cout << routes.dump(2) << "\n";
    return 0;
  }
  for (const auto& r : routes)
    std::cout << fmt::format("{:<7} {:<45} {:<10} {}\n", r["method"].get<std::string>(),
                             r["pattern"].get<std::string>(), r["role"].get<std::string>(),
                             r["kind"].get<std::string>());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sandfortd — the Sandfort sandbox daemon"};
  app.require_subcommand(1);
  config_flags flags;

  auto* serve_cmd = app.add_subcommand("serve", "run the API server");
  add_config_flags(serve_cmd, flags);
  auto* admin_cmd = app.add_subcommand("admin", "administration");
  admin_cmd->require_subcommand(1);
  auto* bootstrap_cmd =
      admin_cmd->add_subcommand("bootstrap", "create the superadmin organization and print its first API key");
  add_config_flags(bootstrap_cmd, flags);
  daemon::audit_verify_options verify_opts;
  auto* verify_cmd = daemon::add_audit_verify_command(app, verify_opts);
  auto* version_cmd = app.add_subcommand("version", "print the version");
  app.set_version_flag("--version", std::string("sandfortd ") + sandfort::version);
  bool routes_json = false;
  auto* routes_cmd = app.add_subcommand(
      "routes", "print the API's route registry (method, pattern, permission, kind) and exit; starts nothing");
  routes_cmd->add_flag("--json", routes_json, "as a JSON array (what the tests read)");
  daemon::backup_options backup_opts;
  auto* backup_cmd = app.add_subcommand(
      "backup",
      "copy the database (SQLite's online backup), its volumes and snapshot images while sandfortd runs; see "
      "docs/operations.md");
  add_config_flags(backup_cmd, flags);
  backup_cmd->add_option("--to", backup_opts.to, "the backup directory to write (mode 0700)")->required();
  backup_cmd->add_flag("--force", backup_opts.force, "replace it if it exists");
  backup_cmd->add_flag("--database-only", backup_opts.database_only,
                       "copy only the database, into the file --to names (no volume or image)");
  daemon::restore_options restore_opts;
  auto* restore_cmd = app.add_subcommand(
      "restore", "with sandfortd stopped: put a backup's database in place and bring back its volumes and snapshot images");
  add_config_flags(restore_cmd, flags);
  restore_cmd->add_option("--from", restore_opts.from, "the backup directory `sandfortd backup` wrote")->required();
  restore_cmd->add_flag("--force", restore_opts.force, "replace the database if one exists");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*version_cmd) {
      std::cout << "sandfortd " << sandfort::version << "\n";
      return 0;
    }
    if (*routes_cmd) return print_routes(routes_json);
    if (*bootstrap_cmd) return admin_bootstrap(flags);
    if (*backup_cmd) return daemon::run_backup(load_or_exit(flags), backup_opts, std::cout, std::cerr);
    if (*restore_cmd) return daemon::run_restore(load_or_exit(flags), restore_opts, std::cout, std::cerr);
    if (*verify_cmd) return daemon::audit_verify(verify_opts, std::cout, std::cerr);
    if (*serve_cmd) return serve(flags);
  } catch (const std::exception& e) {
    std::cerr << "sandfortd: " << e.what() << "\n";
    return 1;
  }
  return 1;
}
