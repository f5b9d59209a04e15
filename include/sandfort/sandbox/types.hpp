#pragma once
// The sandbox service's own vocabulary: what a caller asks for and what it gets back.
// No HTTP, no JSON: the api module maps these to and from the wire.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/proxy/rules.hpp"

namespace sandfort {
struct guardrails_config;
}
namespace sandfort::store {
struct org_guardrails;
}
namespace sandfort::audit {
struct actor;
class journal;
}  // namespace sandfort::audit

namespace sandfort::sandbox {

// Why a sandbox stopped: `reason` in the details of the audit event that records it (a stop, or
// the state `stopped` or `error` set by the daemon), and the reason of `sandbox.stopped` on the
// event stream (docs/events.md). A fixed set: clients switch on it.
namespace stop_reason {
inline constexpr const char* request = "request";            // POST …/stop
inline constexpr const char* idle_timeout = "idle_timeout";  // the reaper: idle_timeout_s
inline constexpr const char* ttl = "ttl";                    // the reaper: ttl_s reached
inline constexpr const char* oom = "oom";                    // the container ended out of memory
inline constexpr const char* kill_switch = "kill_switch";    // the organization's stop-all
inline constexpr const char* daemon_restart = "daemon_restart";  // found not running at start-up
inline constexpr const char* error = "error";                // the sandbox failed (state error)
inline constexpr const char* exited = "exited";              // its main process ended
inline constexpr const char* disk_quota = "disk_quota";      // the disk guard: over disk_mb
}  // namespace stop_reason

// What the sandbox module's asynchronous calls return.
template <typename T>
using task = boost::asio::awaitable<result<T>>;

struct resources {
  double cpus = 0;
  std::int64_t memory_mb = 0;
  std::int64_t pids = 0;
  std::int64_t disk_mb = 0;  // writable layer and read-write volumes; 0 (rows before it): disk.default_mb
};

// A volume of the organization mounted into a new sandbox.
struct volume_request {
  std::string name;
  std::string mount_path;  // absolute and normalized
  bool read_only = false;
};

// An organization secret a sandbox is created with (docs/secrets.md): the sandbox gets only a
// placeholder, in the environment variable `env`; the egress proxy puts the value in.
struct secret_attachment {
  std::string name;
  std::string env;  // empty: the name upper-cased, '-' as '_' ("openai" → OPENAI)
};
struct attached_secret {
  std::string name;
  std::string env;
  std::string placeholder;  // "sfph_" + 32 hex: worthless anywhere but in this sandbox's requests
};

struct create_request {
  std::string name;      // optional
  std::string snapshot;  // empty: the configured default image
  bool wait = false;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> labels;
  std::optional<double> cpus;
  std::optional<std::int64_t> memory_mb;
  std::optional<std::int64_t> pids;
  std::optional<std::int64_t> disk_mb;
  std::vector<std::string> egress_allowlist;
  std::vector<std::string> egress_deny;          // host patterns refused whatever allows them
  std::vector<proxy::egress_rule> egress_rules;  // allows by host, method and path (docs/egress.md)
  // None of the three egress fields was given: the organization's egress defaults apply.
  bool egress_given = false;
  std::optional<std::int64_t> ttl_s;
  std::optional<std::int64_t> idle_timeout_s;  // 0: never; absent: guardrails.default_idle_timeout_s
  std::string user;
  std::string workdir;
  bool public_preview = false;
  std::vector<volume_request> volumes;
  std::string runtime;  // runc | gvisor; empty: the configured default_runtime
  std::vector<secret_attachment> secrets;
};

// PATCH: only the fields present change.
struct update_request {
  std::optional<std::map<std::string, std::string>> labels;
  std::optional<std::int64_t> ttl_s;
  std::optional<std::int64_t> idle_timeout_s;
  std::optional<std::vector<std::string>> egress_allowlist;
  std::optional<std::vector<std::string>> egress_deny;
  std::optional<std::vector<proxy::egress_rule>> egress_rules;
};

// The validated, defaulted request as stored with the sandbox.
struct sandbox_spec {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> labels;
  resources limits;
  std::vector<std::string> egress_allowlist;
  std::vector<std::string> egress_deny;
  std::vector<proxy::egress_rule> egress_rules;
  std::optional<std::int64_t> ttl_s;
  std::int64_t idle_timeout_s = 0;  // 0: never
  std::string user;
  std::string workdir;
  bool public_preview = false;
  std::vector<volume_request> volumes;
  // runc, or gvisor: a kernel of its own (runsc), no network interface, its agent dialing home
  // (docs/architecture.md, "The agent dials home").
  std::string runtime = "runc";
  // No network interface; the agent dials home. Always so for gvisor; for runc when the daemon's
  // runc_dials_home was set as the sandbox was made.
  bool dials_home = false;
  // The organization's snapshot the sandbox was created from, as the caller named it (the row's
  // `snapshot` column holds its image); empty when created from an image reference.
  std::string snapshot_name;
  // Handed out by the warm pool: the container was made before the request, so its Docker
  // configuration holds none of the caller's environment, and every start of it claims the
  // agent again with that environment and a new proxy credential (src/sandbox/pool_members.cpp).
  bool pooled = false;
  // Fixed at create (docs/secrets.md): the secrets attached, and whether the organization's
  // interception CA was installed in the container's filesystem and named by the variables TLS
  // clients read (a sandbox with secrets, or with method/path egress rules).
  std::vector<attached_secret> secrets;
  bool trusts_interception_ca = false;
};

struct sandbox_view {
  std::string id;
  std::string name;
  std::string state;
  std::string snapshot;
  std::string created_at;
  std::string updated_at;
  std::optional<std::string> expires_at;
  std::string error_message;
  sandbox_spec spec;
  std::string preview_url_template;  // "http://{port}-sbx-….preview.localhost:8081"
};

// A TCP port listening inside a sandbox, as the agent sees it in /proc/net/tcp{,6}.
struct listening_port {
  int port = 0;
  std::string address;  // "0.0.0.0", "127.0.0.1", "::"
  std::string family;   // ipv4 | ipv6
  std::optional<int> pid;
  std::optional<std::string> process;
  std::string url;  // its preview URL
  // The preview reaches the sandbox's own address: a listener bound to loopback only is not.
  bool previewable = false;
};

struct sandbox_metrics {
  double cpu_percent = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t memory_limit_bytes = 0;
  std::int64_t pids = 0;
  std::uint64_t egress_bytes_in = 0;   // through the egress proxy since the sandbox started
  std::uint64_t egress_bytes_out = 0;
  std::uint64_t egress_allowed = 0;    // proxy decisions since the sandbox started
  std::uint64_t egress_denied = 0;
  // Its writable layer and read-write volumes as last measured (docs/limits.md, "Disk").
  std::optional<std::int64_t> disk_bytes;
};

// What a sandbox did through the egress proxy (connections counted when they end).
struct egress_traffic {
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
};

struct preview_link {
  std::string url;
  std::string token;  // empty when the sandbox's previews are public
  std::string link;   // the URL to hand on: opens the preview as it is (preview::link_for)
};

struct list_request {
  std::string state;
  std::vector<std::pair<std::string, std::string>> labels;  // label=k:v filters, all must match
  std::size_t limit = 100;
  std::string cursor;
};

struct list_page {
  std::vector<sandbox_view> items;
  std::string next_cursor;  // empty: no more
};

struct exec_request {
  std::vector<std::string> argv;  // either argv ...
  std::string command;            // ... or a /bin/sh -c command line
  std::string cwd;
  std::map<std::string, std::string> env;
  std::optional<std::string> stdin_data;
  std::optional<std::int64_t> timeout_s;
  bool binary = false;
};

struct code_run_request {
  std::string language;  // python | node | bash | sh
  std::string code;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::optional<std::int64_t> timeout_s;
};

class budget_share;  // agent_connector.hpp

struct exec_result {
  int exit_code = 0;
  std::string stdout_text;
  std::string stderr_text;
  std::optional<std::string> stdout_b64;
  std::optional<std::string> stderr_b64;
  std::int64_t duration_ms = 0;
  bool timed_out = false;
  bool truncated = false;
  bool oom_killed = false;  // the kernel's OOM killer ended the process (the sandbox's memory limit)
  // The answer's share of the connector's memory budget: whoever writes the result to its caller
  // keeps it until the last byte is out, and drops it on the I/O thread.
  std::shared_ptr<budget_share> memory;
};

// --- Volumes (src/sandbox/volumes.cpp) ----------------------------------------------------------

struct volume_create_request {
  std::string name;
  std::optional<std::int64_t> size_mb;  // refused: no storage driver here enforces it
};

struct volume_view {
  std::string id;
  std::string name;
  std::optional<std::int64_t> size_mb;
  std::string state;  // ready | deleting
  std::string created_at;
  std::string updated_at;
};

// A page of an organization's named resources (volumes, snapshots), in name order.
struct name_page_request {
  std::size_t limit = 100;
  std::string cursor;  // the last name of the previous page
};
using volume_list_request = name_page_request;

struct volume_page {
  std::vector<volume_view> items;
  std::string next_cursor;  // empty: no more
};

// --- Snapshots (src/sandbox/snapshots.cpp) --------------------------------------------------------

struct snapshot_create_request {
  std::string sandbox_id;  // id or name of the organization's sandbox
  std::string name;
};

struct snapshot_view {
  std::string id;
  std::string name;
  std::int64_t size_bytes = 0;
  std::string source_sandbox_id;
  std::string state;  // ready | deleting
  std::string created_at;
  std::string updated_at;
};

using snapshot_list_request = name_page_request;

struct snapshot_page {
  std::vector<snapshot_view> items;
  std::string next_cursor;  // empty: no more
};

// --- Guardrails (docs/guardrails.md) ------------------------------------------------------------

// What an organization may take: its own limits where set, else the configured defaults.
struct org_limits {
  std::int64_t max_sandboxes = 0;  // not deleted
  double max_cpus = 0;             // of running sandboxes together
  std::int64_t max_memory_mb = 0;  // of running sandboxes together
  std::vector<std::string> allowed_images;  // patterns, '*' any run of characters
  std::int64_t max_volumes = 0;    // not deleted
  std::int64_t max_snapshots = 0;  // not deleted
  std::int64_t max_disk_mb = 0;    // disk_mb of sandboxes not deleted, together
  // runc, gvisor: what its sandboxes may run on, created or started (docs/guardrails.md, "Runtime policy").
  std::vector<std::string> allowed_runtimes;
};

struct org_usage {
  std::int64_t sandboxes = 0;  // not deleted
  std::int64_t running = 0;    // creating, pulling, started, paused
  double cpus = 0;
  std::int64_t memory_mb = 0;
  std::int64_t volumes = 0;    // not deleted (rows: a create in flight is not counted here)
  std::int64_t snapshots = 0;  // not deleted (likewise)
  std::int64_t disk_mb = 0;    // disk_mb of sandboxes not deleted (stopped ones keep their disk)
};

struct org_guardrails_view {
  std::string org_id;
  org_limits limits;
  std::vector<std::string> own_fields;  // which of limits are the organization's own (the rest: defaults)
  org_usage usage;
  std::optional<std::string> stopped_since;  // the kill switch
  bool stopped_by_superadmin = false;
};

// PUT /v1/orgs/{org}/limits: an absent field is unchanged, a null one goes back to the default.
struct limits_update {
  std::optional<std::optional<std::int64_t>> max_sandboxes;
  std::optional<std::optional<double>> max_cpus;
  std::optional<std::optional<std::int64_t>> max_memory_mb;
  std::optional<std::optional<std::vector<std::string>>> allowed_images;
  std::optional<std::optional<std::int64_t>> max_volumes;
  std::optional<std::optional<std::int64_t>> max_snapshots;
  std::optional<std::optional<std::int64_t>> max_disk_mb;
  std::optional<std::optional<std::vector<std::string>>> allowed_runtimes;
};

// The limits in force for an organization: its own (`own`) where set, else the configured
// defaults (src/sandbox/admission.cpp).
org_limits limits_in_force(const guardrails_config& defaults, const store::org_guardrails& own);

// The runtime of a create that names none: the configured default_runtime where the limits allow
// it, else the first runtime they allow (an organization required to run gVisor gets gVisor).
std::string default_runtime_of(const org_limits& limits, const std::string& configured_default);

// A quota that counts things an organization keeps (sandboxes, volumes, snapshots: rows not
// deleted). One more is refused when `in_use` + 1 would exceed `limit`.
struct count_quota {
  std::string quota;      // "sandboxes", "volumes", "snapshots": named in the message and the event
  std::int64_t limit = 0;
  std::int64_t in_use = 0;
  std::string remedy;     // the message's parenthesis: what counts and what makes room
  std::vector<std::pair<std::string, std::string>> details;  // more for the audit event (the image)
};

// Every count quota is refused here, in the same words (src/sandbox/admission.cpp): 429
// quota_exceeded "quota exceeded: volumes — 2 of 2 in use (delete some)", recorded first as
// `guardrail.quota_exceeded` (outcome denied; quota, limit, in_use) in the organization's chain.
// If even the record fails, the call is still refused.
result<void> admit_count(audit::journal& journal, const std::string& org_id, const audit::actor& who,
                         const count_quota& q);

// Creates of one kind (volumes, snapshots) admitted by their quota whose rows are not inserted
// yet, per organization. Such a create asks Docker between its check and its insert, so the
// rows alone would let a burst of parallel creates all pass the check.
using creates_in_flight = std::map<std::string, std::int64_t>;
// One create admitted by its quota, counted among its organization's creates in flight until it
// is destroyed: once its row is in, or it failed. Holds the map, not the part that made it: a
// create suspended at shutdown may be destroyed after that part. Moved, only the new one counts.
class admitted_create {
 public:
  admitted_create(std::shared_ptr<creates_in_flight> creating, std::string org_id);
  admitted_create(admitted_create&&) noexcept = default;
  admitted_create& operator=(admitted_create&&) = delete;
  ~admitted_create();

 private:
  std::shared_ptr<creates_in_flight> creating_;  // none once moved from
  std::string org_id_;
};
// admit_count() with the organization's creates in flight counted as in use (q.in_use: its rows).
// Admitted, the create is one of them while the returned admitted_create lives. Everything runs
// on the daemon's one I/O thread: check and count have no co_await between them.
result<admitted_create> admit_create(audit::journal& journal, const std::string& org_id, const audit::actor& who,
                                     count_quota q, const std::shared_ptr<creates_in_flight>& creating);

struct stop_all_report {
  std::vector<std::string> stopped;             // ids
  std::map<std::string, std::string> failed;    // id → why
};

}  // namespace sandfort::sandbox
