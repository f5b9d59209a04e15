#pragma once
// One function per CLI command. Each returns the process's exit status or throws failure.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace sandfort::cli {

class api_client;

// Rows as aligned columns, two spaces apart; the first row is the header. Not empty.
void print_table(const std::vector<std::vector<std::string>>& rows);
// A field of a listed object as a table cell: "-" when absent or null, JSON for non-strings.
std::string cell(const nlohmann::json& v, const char* key);
// Every item of a cursor-paged listing (`path` without a query), following next_cursor to the end.
nlohmann::json list_all(api_client& client, const std::string& path);
// A column of an `ls` table: its header and the field it shows.
struct column {
  const char* header;
  const char* key;
};
// `ls`: every item at `path` (list_all) as the API's JSON, {"items": […]}, or as a table of `columns`.
void print_listing(api_client& client, const std::string& path, const std::vector<column>& columns, bool json);
// `create`: what the API answered as its JSON, or only its id.
void print_created(const nlohmann::json& created, bool json);
// `get`: one "key: value" line for each of `keys` the object has, in that order.
void print_fields(const nlohmann::json& v, const std::vector<const char*>& keys);

// The organization's named resources (volumes, snapshots): one collection of the API whose members
// are created by POST, listed a page at a time, read and deleted by name or id. Only the create
// body and the fields shown differ; volume.cpp and snapshot.cpp each describe theirs.
struct named_resource {
  const char* collection;           // "/v1/volumes"
  std::vector<column> columns;      // of `ls`
  std::vector<const char*> fields;  // of `get`
};
extern const named_resource volume_resource;
extern const named_resource snapshot_resource;
int cmd_named_create(const named_resource& r, const nlohmann::json& body, bool json);
int cmd_named_ls(const named_resource& r, bool json);
int cmd_named_get(const named_resource& r, const std::string& name, bool json);
// Deletes each in turn ("deleted NAME"); the first refusal ends the command.
int cmd_named_rm(const named_resource& r, const std::vector<std::string>& names);

struct create_options {
  std::string name;
  std::string snapshot;
  bool wait = false;
  std::vector<std::string> egress;
  std::vector<std::string> env;  // K=V
  std::optional<double> cpus;
  std::optional<int> memory_mb;
  std::optional<int> ttl_s;           // stopped that long from now, deleted later
  std::optional<int> idle_timeout_s;  // stopped after that long unused; 0 never
  std::vector<std::string> volumes;   // NAME:/path[:ro]
  std::string workdir;                // empty: the server's default, /work
  std::string runtime;                // runc or gvisor; empty: the server's default_runtime
  bool json = false;
};

// `org set-limits`: the fields given change, the ones in `reset` go back to the configured default.
struct org_limits_options {
  std::string org;
  std::optional<int> max_sandboxes;
  std::optional<double> max_cpus;
  std::optional<std::int64_t> max_memory_mb;
  std::optional<int> max_volumes;
  std::optional<int> max_snapshots;
  std::vector<std::string> allowed_images;
  std::vector<std::string> allowed_runtimes;
  std::vector<std::string> reset;  // field names: max_sandboxes, max_cpus, max_memory_mb, allowed_images,
                                   // max_volumes, max_snapshots, allowed_runtimes
  bool json = false;
};

struct login_options {
  std::string base_url;     // instead of asking (API key) or of the configured one (OIDC)
  bool api_key_stdin = false;  // the key is all of stdin, nothing is asked (scripts, agents)
  std::string oidc_issuer;  // set: sign in through this issuer's device flow instead of an API key
  std::string client_id;
  std::string scope = "openid offline_access";
  std::string resource;
  std::string audience;
};

// The audit log of an organization (`org` empty: the caller's own; the superadmin may name any).
struct audit_filter_options {
  std::string org;
  std::optional<std::int64_t> since_seq;
  std::string since, until;  // RFC 3339 UTC
  std::string actor, action, target;
};

struct audit_list_options {
  audit_filter_options filter;
  std::optional<int> limit;  // events per page
  bool all = false;          // every page, not just the first
  bool json = false;
};

struct audit_verify_options {
  std::string org;
  std::string public_key_file;   // the pinned PEM; required
  std::string checkpoints_file;  // checkpoints kept outside the server (the daemon's export file)
  int page_size = 100000;        // events per export response
  bool json = false;
};

int cmd_login(const login_options& o);
int cmd_logout();
int cmd_whoami(bool json);

int cmd_sandbox_create(const create_options& o);
int cmd_sandbox_ls(bool json);
int cmd_sandbox_get(const std::string& id, bool json);
int cmd_sandbox_rm(const std::vector<std::string>& ids);
// action is stop, start, pause or resume: POST /v1/sandboxes/{id}/{action}.
int cmd_sandbox_lifecycle(const std::string& id, const std::string& action, bool json);

// args[0] is the sandbox, the rest the command's argv.
// With send_stdin, all of this process's stdin is read first and handed to the command.
int cmd_exec(std::vector<std::string> args, std::optional<int> timeout_s, const std::string& cwd, bool send_stdin);

int cmd_new(const create_options& o);
int cmd_run(const std::string& id, const std::vector<std::string>& words, std::optional<int> timeout_s);
// POST …/commands: prints the command's id (for `sandfort logs`) and returns at once.
int cmd_run_background(const std::string& id, const std::vector<std::string>& words);
int cmd_rm_current(const std::string& id);

int cmd_cp(const std::string& src, const std::string& dst);
// args: SANDBOX COMMAND, or COMMAND alone (the current sandbox).
int cmd_logs(const std::vector<std::string>& args, bool follow);
// An interactive terminal (PTY over WebSocket); command empty means the login shell.
int cmd_shell(const std::string& id, const std::string& command);
// A bash or zsh completion script on stdout.
int cmd_completion(const std::string& shell);
// The preview link of PORT; wait_s > 0 first waits up to that long for PORT to be listening.
int cmd_preview(const std::string& id, int port, int wait_s, bool json);

// An organization's guardrails (`org` empty: the caller's own).
int cmd_org_limits(const std::string& org, bool json);
int cmd_org_set_limits(const org_limits_options& o);
// The kill switch; exit 1 when a sandbox could not be stopped (the switch is on all the same).
int cmd_org_stop_all(const std::string& org, bool json);
int cmd_org_lift(const std::string& org);

// A named volume of the organization; ls, get and rm are cmd_named_* of volume_resource.
int cmd_volume_create(const std::string& name, bool json);
// `--volume NAME:/path[:ro]` as an element of the create request's `volumes`; usage error otherwise.
nlohmann::json volume_mount(const std::string& spec);

// A snapshot of a sandbox (id or name); ls, get and rm are cmd_named_* of snapshot_resource.
int cmd_snapshot_create(const std::string& sandbox, const std::string& name, bool json);

int cmd_audit_list(const audit_list_options& o);
// JSON Lines of every matching event, page_size per response, to out_file ("" or "-": stdout).
int cmd_audit_export(const audit_filter_options& o, const std::string& out_file, int page_size);
// The PEM to stdout, or into out_file (an existing file only with force).
int cmd_audit_public_key(const std::string& out_file, bool force, bool json);
int cmd_audit_checkpoint(const std::string& org, bool json);
// Exit 0 intact, 1 broken, 2 usage, connection or API errors.
int cmd_audit_verify(const audit_verify_options& o);
// The signed checkpoints as JSON Lines to stdout, or those out_file lacks appended to it; exit 1
// when the server shows a kept seq differently.
int cmd_audit_checkpoints(const std::string& org, const std::string& out_file);

// `key …`, `org create` and `audit checkpoints` (cli/admin.cpp), added to app after the `org`
// and `audit` groups.
void add_admin_commands(CLI::App& app, int& status, bool& as_json);

}  // namespace sandfort::cli
