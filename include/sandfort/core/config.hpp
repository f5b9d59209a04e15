#pragma once
// sandfortd's configuration: built-in defaults, then a JSON file, then SANDFORT_* environment
// variables, then command-line overrides, each layer over the previous one. Every key and its
// default is documented in docs/configuration.md.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort {

struct resource_limits {
  double cpus = 1.0;
  std::int64_t memory_mb = 1024;
  std::int64_t pids = 512;
};

// The sandbox bridge network (docs/security.md explains the choices).
struct network_config {
  std::string name = "sandfort";
  std::string subnet = "10.213.0.0/16";  // the gateway (first address) is where the egress proxy listens
  std::string bridge = "sandfort0";       // the host interface; the firewall rules are keyed on it
  bool host_firewall = true;               // install iptables rules so sandboxes reach only the proxy
};

struct egress_config {
  int proxy_port = 3128;
  // Comma-separated CIDRs the proxy may dial although they are private/loopback/link-local
  // ("10.1.2.0/24,fd00::/8"). Empty: only public addresses.
  std::string allowed_ranges;
  int connect_timeout_s = 10;
  int idle_timeout_s = 300;
  int max_tunnels_per_sandbox = 64;
  // Connections whose credential is not yet checked ("pending"), per source address and in
  // total, and authenticated tunnels in total: a connection beyond a cap is closed at once.
  int max_pending_per_source = 32;
  int max_pending = 512;
  int max_tunnels = 4096;
  // The organization's own proxy, "host:port" (docs/egress.md, "Upstream proxy"): every allowed
  // connection is dialed through it with CONNECT. Empty: destinations are dialed directly.
  std::string upstream_proxy{};
  std::string upstream_proxy_username{};       // Basic credentials for it; empty: none
  std::string upstream_proxy_password_file{};  // the password, alone in a file of mode 0600
  std::string upstream_proxy_password{};       // read from that file at load; never written back
};

struct preview_config {
  std::string listen = "127.0.0.1:8081";
  std::string domain = "preview.localhost";
  // What the API shows; {port} and {id} are replaced. Empty: http://{port}-{id}.<domain>:<listen port>.
  std::string url_template;
  int max_connections = 1024;  // open connections at which the listener pauses accepting
  int max_idle_connections_per_source = 64;  // as the API listener's, below
  int max_idle_connections = 512;
};

// sandfortd terminating TLS on `listen` itself (docs/operations.md): both files or neither.
struct tls_config {
  std::string cert_file;  // PEM: certificate chain; re-read on SIGHUP
  std::string key_file;   // PEM: its private key
  bool enabled() const { return !cert_file.empty(); }
};

// Which registries a create request's `snapshot` may name (docs/configuration.md, "images").
struct images_config {
  // "host" or "host:port" entries matched exactly (case-insensitive), or "*" for any registry
  // whose host is a public name or address. Empty: the registry of default_image and docker.io.
  // A loopback/private/link-local registry host is refused unless listed exactly.
  std::vector<std::string> allowed_registries;
};

// One OpenID Connect issuer whose JWT access tokens sandfortd accepts (docs/identity.md).
struct oidc_issuer_config {
  std::string issuer;                  // `iss`, exactly; https:// (http:// only for a loopback host)
  std::vector<std::string> audiences;  // the token's `aud` must contain one of them
  std::string jwks_uri;                // empty: discovered from <issuer>/.well-known/openid-configuration
  std::vector<std::string> algorithms{"RS256", "ES256", "EdDSA"};
  // The organization: a claim naming it (by name), or one fixed organization for every token.
  std::string org_claim;
  std::string org;
  // Roles: values of role_claim (a string or an array of strings) mapped to admin|member|viewer;
  // the highest match wins; default_role (may be empty: none) applies when nothing matches.
  std::string role_claim = "groups";
  std::map<std::string, std::string> role_map;
  std::string default_role;
  std::string name_claim = "email";  // shown by whoami and in logs beside the subject
  std::string ca_file;               // empty: the system's trust store
  // Console sign-in through this issuer (docs/console.md): the authorization code flow with PKCE,
  // as the client console_client_id of the provider. Empty: its tokens are accepted, but the
  // console offers no button for it.
  std::string console_client_id;
  // A confidential client's secret sits in a file of its own (not readable by others), so the
  // configuration can be shared and logged; empty: a public client (PKCE alone).
  std::string console_client_secret_file;
  std::string console_client_secret;  // read from that file by finalize_config, never set in the config
  // How the secret reaches the token endpoint: client_secret_basic (RFC 6749's must-support) or
  // client_secret_post, for providers that hold a client to the method it was registered with.
  std::string console_client_auth = "client_secret_basic";
  std::string console_name;                         // the button's label; empty: the issuer's host
  std::vector<std::string> console_scopes{"openid"};  // asked for at sign-in; must include openid
};

struct oidc_config {
  std::vector<oidc_issuer_config> issuers;  // only in the config file
  int leeway_s = 60;                        // for exp, nbf and iat
  int max_token_bytes = 16384;
  int jwks_min_refresh_s = 30;     // an unknown kid refreshes an issuer's keys at most this often
  int jwks_default_cache_s = 300;  // key set lifetime when the answer has no Cache-Control max-age
  int jwks_max_cache_s = 86400;    // the longest a key set is trusted without asking again
  int fetch_timeout_s = 5;
};

// The web console (docs/console.md).
struct console_config {
  // The origin people reach the console at ("https://sandfort.example.com"), from which the
  // identity provider's redirect back is made. Empty: the Host the browser sent (the provider
  // only redirects to URIs registered with it). Set it behind a reverse proxy.
  std::string public_url;
};

// The audit chain (docs/audit.md).
struct audit_config {
  std::string key_path;             // Ed25519 signing key (PEM, 0600); empty → <state_dir>/audit-signing.key
  int checkpoint_interval_s = 300;  // how often each organization's chain head is signed
  std::string export_path;          // checkpoints are also appended here (JSON lines) when set
  int summary_interval_s = 60;      // authentication failures and egress decisions are counted per interval
};

// Organization secrets (docs/secrets.md).
struct secrets_config {
  std::string key_file;  // AES-256 key sealing secret values (0600); empty → <state_dir>/secrets.key
  int max_per_org = 100;      // secrets an organization may hold
  int max_value_bytes = 8192; // the largest value accepted
  // The CA bundle an intercepted connection's real upstream must verify against (PEM); empty: the
  // system trust store. For an organization whose hosts use a private CA, and for tests.
  std::string upstream_ca_file;
};

// Life-cycle events delivered to an organization's webhooks (docs/events.md, "Webhooks").
struct webhooks_config {
  int max_per_org = 10;           // webhooks an organization may register
  // Comma-separated CIDRs a webhook URL may reach although they are private/loopback/link-local
  // ("172.17.0.1/32"), as egress.allowed_ranges for sandboxes. Empty: only public addresses.
  std::string allowed_ranges;
  int concurrency = 4;            // attempts in flight at once, all webhooks together (one per webhook)
  int timeout_s = 10;             // one attempt: resolve, connect, TLS, request and response
  int retry_base_ms = 30000;      // the first retry's delay; doubled each attempt, with jitter
  int retry_max_ms = 3600000;     // the longest delay between two attempts
  int max_age_s = 86400;          // an event not delivered this long after it happened is failed
  int poll_interval_ms = 5000;    // the worker looks again this often without being woken
  int log_retention_s = 604800;   // finished deliveries stay in the log this long
};

// A token bucket: `burst` requests at once, refilled at `rate_per_s`; rate 0 means unlimited.
struct rate_limit {
  double rate_per_s = 0;
  std::int64_t burst = 0;
};

// Per API key (or identity provider user), by the role it authenticates with.
struct rate_limits_config {
  rate_limit viewer{20, 100};
  rate_limit member{50, 200};
  rate_limit admin{50, 200};
  rate_limit superadmin{0, 0};  // the operator's own keys: unlimited unless set
  // Every principal of one organization together, beside its own bucket (the operator excepted):
  // more keys do not buy an organization more requests.
  rate_limit org{200, 800};
};

// Guardrails (docs/guardrails.md): what one organization and one sandbox may take.
struct guardrails_config {
  // An organization's quotas unless its own limits say otherwise (PUT /v1/orgs/{org}/limits).
  int max_sandboxes = 100;       // sandboxes not deleted (stopped ones hold a container and disk)
  double max_cpus = 32;          // CPUs of its running sandboxes together
  std::int64_t max_memory_mb = 65536;  // memory of its running sandboxes together
  std::int64_t max_disk_mb = 1048576;  // disk_mb of its sandboxes not deleted, together
  std::vector<std::string> allowed_images{"*"};  // image patterns ('*' any run of characters)
  // Runtimes its sandboxes may run on (runc, gvisor). When default_runtime is not among them, a
  // create that names none gets the first of them.
  std::vector<std::string> allowed_runtimes{"runc", "gvisor"};
  int max_volumes = 20;    // volumes not deleted (each may fill the host's disk)
  int max_snapshots = 20;  // snapshots not deleted (each an image on the host's disk)
  // A sandbox without traffic (exec, sessions, files, PTY, previews) this long is stopped; 0: never.
  int default_idle_timeout_s = 1800;
  // A sandbox stopped by its TTL or idle timeout is deleted this long after.
  int delete_grace_s = 3600;
  rate_limits_config rate_limits{};
  // What a background command's log keeps per stream (the newest bytes); the agent's --log-cap.
  std::uint64_t command_log_cap_bytes = 1u << 20;
  // API keys of an organization that still work (not revoked, not expired).
  int max_api_keys = 50;
};

// The host's memory as sandbox admission sees it (docs/limits.md, "Host memory"): the memory
// limits of sandboxes that run, are paused or are being made, and of the warm pool's members,
// together stay within (MemTotal - memory_reserve_mb) x memory_overcommit.
struct host_config {
  std::int64_t memory_reserve_mb = 2048;  // kept for sandfortd, Docker and the system
  double memory_overcommit = 1.0;         // above 1: limits may add up to more than the host has
};

// A sandbox's disk (docs/limits.md, "Disk"): how resources.disk_mb is enforced and measured.
struct disk_config {
  // auto: hard where the engine can (overlay2 on XFS mounted with pquota), else measured;
  // hard: Docker's StorageOpt size on every container; measured: walk and stop.
  std::string enforcement = "auto";
  std::int64_t default_mb = 10240;  // disk_mb when a create names none
  std::int64_t max_mb = 102400;     // the largest disk_mb a create may ask for
  int check_interval_s = 2;         // between two measuring rounds over the started sandboxes
  // One measurement of one sandbox is bounded: a tree beyond these counts as over its limit.
  std::int64_t max_walk_entries = 1'000'000;
  int max_walk_depth = 256;
};

// The SQLite store's upkeep (docs/configuration.md, "Store").
struct store_config {
  // Rows of deleted sandboxes are removed this long after their deletion (the audit log keeps
  // what happened to them). 0 keeps them for ever; requests cost the same either way.
  std::int64_t deleted_retention_s = 7 * 24 * 3600;
  // How often deleted rows past retention are pruned and the WAL is checkpointed.
  int maintenance_interval_s = 60;
  // The state directory's filesystem counts as full below this much free space: changes are
  // refused with 507 until it returns (docs/limits.md, "A full state disk").
  std::int64_t min_free_mb = 64;
  // WAL file kept written ahead so that deletes and stops still commit on a full disk.
  std::int64_t reserve_mb = 8;
};

// One warm pool (docs/pool.md): started sandboxes of one image and one resource class, waiting
// to be claimed by a create that asks for exactly that.
// Its target size moves between min_size and max_size with the demand (warm_pool.hpp's pool_sizing).
struct pool_config {
  std::string image;                  // empty: default_image
  std::optional<resource_limits> resources;  // absent: default_resources
  int min_size = 0;  // members kept started and unclaimed when idle ("size" or "min_size" in the file)
  int max_size = -1; // the most it grows to after a burst; -1 (absent): min_size, a pool of fixed size
};

// How the warm pools refill, grow and shrink (docs/pool.md, "How big it gets").
struct pool_tuning {
  int max_parallel = 2;     // members being made at once, across all pools
  int burst_window_s = 60;  // a burst: the matching creates within this many seconds
  int idle_shrink_s = 300;  // without a matching create this long, a pool goes back to min_size
};

// The E2B-compatible endpoints under /e2b and /e2b-sandbox (docs/e2b.md).
struct e2b_config {
  bool enabled = true;
};

struct config {
  std::string listen = "127.0.0.1:8080";
  std::string state_dir = "./var";
  std::string database;  // empty → <state_dir>/sandfort.db
  std::string docker_socket = "/var/run/docker.sock";
  std::string agent_path;  // empty → sandfort-agent beside the sandfortd executable
  std::string default_image = "sandfort/base:bookworm";
  std::string runtime;  // the Docker runtime of runc sandboxes; empty → the engine's default
  // gVisor sandboxes (`"runtime": "gvisor"` on create): the Docker runtime registered for runsc
  // (scripts/lib.sh registers "runsc"); empty: gVisor is not offered.
  std::string gvisor_runtime = "runsc";
  std::string default_runtime = "runc";  // of a create that names none: runc | gvisor
  // runc sandboxes made as gVisor's are: no network interface but lo, the agent dialing home,
  // egress through its 127.0.0.1:3128 (docs/gvisor.md, "runc with no interface"). Fixed per
  // sandbox when it is made.
  bool runc_dials_home = false;
  std::string log_format = "text";  // text | json
  std::string log_level = "info";

  std::uint64_t max_body_bytes = 16u << 20;
  int header_timeout_s = 10;
  int idle_timeout_s = 60;
  int shutdown_grace_s = 20;
  int max_connections = 1024;  // on the API listener: at the cap, accepting pauses until one closes
  // Connections without a complete request (or kept alive between requests), per source and in
  // total; one more closes the oldest of them (docs/configuration.md).
  int max_idle_connections_per_source = 64;
  int max_idle_connections = 512;
  tls_config tls{};
  // Proxies whose X-Forwarded-For is believed ("127.0.0.1/32,10.0.0.0/8"): the client address in
  // the audit chain and in rate accounting (src/api/client_address.cpp). Empty: none.
  std::string trusted_proxies;

  int agent_start_timeout_s = 30;
  int stop_timeout_s = 5;
  int docker_timeout_s = 30;
  int pull_timeout_s = 600;

  int exec_default_timeout_s = 60;
  int exec_max_timeout_s = 3600;
  std::uint64_t output_cap_bytes = 10u << 20;
  // Agents are untrusted: a forwarded answer's body must keep moving (event streams and the
  // PTY excepted), and buffered answers of all sandboxes share one memory budget.
  int agent_idle_timeout_s = 300;
  std::uint64_t agent_response_budget_mb = 128;
  // How long a connection to an agent is kept idle for the next call (buffered or forwarded); 0: a new
  // connection per call.
  int agent_keepalive_s = 10;

  resource_limits default_resources{};
  resource_limits max_resources{4.0, 8192, 4096};

  network_config network{};
  egress_config egress{};
  preview_config preview{};
  images_config images{};
  oidc_config oidc{};
  console_config console{};
  audit_config audit{};
  secrets_config secrets{};
  webhooks_config webhooks{};
  guardrails_config guardrails{};
  disk_config disk{};
  host_config host{};
  store_config store{};
  e2b_config e2b{};
  std::vector<pool_config> pools;  // "pools" in the file: a list of objects (file only)
  pool_tuning pool{};              // "pool" in the file: one object for all of them
};

// key=value pairs from the command line; keys as in the file ("max_resources.cpus").
using config_overrides = std::map<std::string, std::string>;

// Loads the layers. file_path may be empty (no file). env_prefix is "SANDFORT_".
// Unknown keys in the file or in overrides are errors, so typos never pass silently.
result<config> load_config(const std::string& file_path, const config_overrides& overrides,
                           char** environ_ptr);

// Fills the derived defaults (database under state_dir, ...) and checks values.
result<void> finalize_config(config& c, const std::string& executable_dir);

}  // namespace sandfort
