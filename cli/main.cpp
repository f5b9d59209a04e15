// sandfort: the command-line client of sandfortd. CLI11 parses; commands.cpp does the work.
#include <CLI/CLI.hpp>
#include <cctype>
#include <iostream>

#include "commands.hpp"
#include "failure.hpp"
#include "sandfort/version.hpp"
#include "usage.hpp"

namespace sc = sandfort::cli;

namespace {

void add_create_options(CLI::App* cmd, sc::create_options& o) {
  cmd->add_option("--snapshot", o.snapshot,
                  "Snapshot of the organization (name or id) or image to start from (default: the server's default "
                  "image)");
  cmd->add_option("--egress", o.egress, "Host the sandbox may reach (repeatable; *.suffix and * allowed)")
      ->allow_extra_args(false);
  cmd->add_option("--env", o.env, "Environment variable KEY=VALUE (repeatable)")->allow_extra_args(false);
  cmd->add_option("--cpus", o.cpus, "CPU limit");
  cmd->add_option("--memory", o.memory_mb, "Memory limit in MiB");
  // The ranges are the server's to check (its 400 names them).
  cmd->add_option("--ttl", o.ttl_s, "Seconds to live: stopped then, deleted later");
  cmd->add_option("--idle-timeout", o.idle_timeout_s,
                  "Seconds without use (exec, files, terminal, preview) before it is stopped; 0 never "
                  "(default: the server's)");
  // Absolute or not is the server's to check (its 400 says so).
  cmd->add_option("--workdir", o.workdir,
                  "Working directory of every command, shell and terminal, made if missing (default: /work)");
  cmd->add_option("--volume", o.volumes,
                  "Mount a volume of the organization: NAME:/path, or NAME:/path:ro read-only (repeatable)")
      ->allow_extra_args(false);
  // Not checked here: which runtimes exist, and whether this daemon offers gVisor, are the
  // server's to say (its 400 names the runtimes, its 503 says gVisor is not offered).
  cmd->add_option("--runtime", o.runtime,
                  "runc, or gvisor: a kernel of its own (gVisor), stronger isolation, slower system calls, no "
                  "network interface (egress through the proxy only) (default: the server's, runc)");
}

void add_audit_filter_options(CLI::App* cmd, sc::audit_filter_options& f) {
  cmd->add_option("--org", f.org, "Organization id or name (default: your own; another one: superadmin only)");
  cmd->add_option("--since-seq", f.since_seq, "Only events after this seq");
  cmd->add_option("--since", f.since, "Only events at or after this UTC time (2025-01-02T03:04:05Z)");
  cmd->add_option("--until", f.until, "Only events at or before this UTC time");
  cmd->add_option("--actor", f.actor, "Only this actor (exact: key:<id>, oidc:<sub>@<issuer>, system, anonymous)");
  cmd->add_option("--action", f.action, "Only this action (exact, e.g. api_key.create)");
  cmd->add_option("--target", f.target, "Only events on this target (exact: org-…, key-…, sbx-…)");
}

// Each export response is built on the daemon's one I/O thread: smaller ones hold it for less long.
void add_page_size_option(CLI::App* cmd, int& page_size) {
  cmd->add_option("--page-size", page_size, "Events per response (1-100000; smaller holds the daemon for less long)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
}

// What the audit commands parse into; main() keeps it alive for the callbacks.
struct audit_args {
  sc::audit_list_options list;
  sc::audit_filter_options exported;
  std::string export_out;
  int export_page_size = 100000;
  std::string key_out;
  bool force = false;
  std::string checkpoint_org;
  sc::audit_verify_options verify;
};

// audit …: the organization's audit log, and its verification against a pinned key.
void add_audit_commands(CLI::App& app, audit_args& a, int& status, bool& as_json) {
  auto* audit = app.add_subcommand("audit", "Read the organization's audit log and verify its hash chain (admin)");
  audit->require_subcommand(1);

  auto* ls = audit->add_subcommand("list", "List audit events, oldest first (one page, or every page with --all)");
  ls->alias("ls");
  add_audit_filter_options(ls, a.list.filter);
  ls->add_option("--limit", a.list.limit, "Events per page (1-1000; server default 100, 1000 with --all)")
      ->check(CLI::Range(1, 1000));
  ls->add_flag("--all", a.list.all, "Follow next_cursor to the last page");
  ls->add_flag("--json", as_json, "Print the API's JSON ({items, next_cursor})");
  ls->callback([&] {
    a.list.json = as_json;
    status = sc::cmd_audit_list(a.list);
  });

  auto* exp = audit->add_subcommand("export", "Write every matching event as JSON Lines, as GET /v1/audit?format=jsonl "
                                              "sends them, following X-Next-Cursor to the end");
  add_audit_filter_options(exp, a.exported);
  exp->add_option("-o,--output", a.export_out, "File to write (complete or not at all; mode 0600); default: stdout");
  add_page_size_option(exp, a.export_page_size);
  exp->callback([&] { status = sc::cmd_audit_export(a.exported, a.export_out, a.export_page_size); });

  auto* key = audit->add_subcommand("public-key", "Print or save the daemon's audit public key (PEM), to pin it");
  key->add_option("-o,--output", a.key_out, "Save the PEM in this file (for audit verify --public-key)");
  key->add_flag("--force", a.force, "Replace an existing file");
  key->add_flag("--json", as_json, "Print the API's JSON ({key_id, algorithm, public_key_pem})");
  key->footer("Pin the key once, at a time you trust the server (or get it from its operator), and keep the "
              "file where the server cannot change it: audit verify trusts that file, not the server.");
  key->callback([&] { status = sc::cmd_audit_public_key(a.key_out, a.force, as_json); });

  auto* checkpoint = audit->add_subcommand("checkpoint", "Have the daemon sign the chain's head now "
                                                         "(POST /v1/audit/checkpoints)");
  checkpoint->add_option("--org", a.checkpoint_org, "Organization id or name (superadmin only; default: your own)");
  checkpoint->add_flag("--json", as_json, "Print the checkpoint's JSON");
  checkpoint->callback([&] { status = sc::cmd_audit_checkpoint(a.checkpoint_org, as_json); });

  auto* ver = audit->add_subcommand(
      "verify", "Download the chain and its signed checkpoints and recompute it here against a pinned public key; "
                "exit 0 intact, 1 broken, 2 usage, connection or API error");
  ver->add_option("--public-key", a.verify.public_key_file,
                  "The daemon's audit public key (PEM) pinned earlier (`sandfort audit public-key -o FILE`). Required: "
                  "a key fetched now from the server being audited would prove nothing")
      ->required();
  ver->add_option("--org", a.verify.org, "Organization id or name (superadmin only; default: your own)");
  ver->add_option("--checkpoints", a.verify.checkpoints_file,
                  "Checkpoints kept outside the server (the daemon's audit.export_path file, JSON Lines); "
                  "they are checked too, so a tail deleted with its checkpoints is found");
  add_page_size_option(ver, a.verify.page_size);
  ver->add_flag("--json", as_json, "Print the report as JSON");
  ver->footer("What it proves: every event up to the latest checkpoint signed by the pinned key is the one that was "
              "hashed, in its place. Events after that checkpoint can still be cut or rewritten unnoticed; "
              "docs/audit.md says what the chain does not prove.");
  ver->callback([&] {
    a.verify.json = as_json;
    status = sc::cmd_audit_verify(a.verify);
  });
}

// What the org commands parse into; main() keeps it alive for the callbacks.
struct org_args {
  std::string org;
  sc::org_limits_options set;
};

// org …: an organization's guardrails (limits, their use) and its kill switch.
void add_org_commands(CLI::App& app, org_args& a, int& status, bool& as_json) {
  auto* org = app.add_subcommand("org", "An organization's limits and kill switch");
  org->require_subcommand(1);
  const char* org_help = "Organization id or name (default: your own; another one: superadmin only)";

  auto* limits = org->add_subcommand("limits", "Show the organization's limits, their use and its kill switch (admin)");
  limits->add_option("org", a.org, org_help);
  limits->add_flag("--json", as_json, "Print the API's JSON");
  limits->callback([&] { status = sc::cmd_org_limits(a.org, as_json); });

  auto* set = org->add_subcommand("set-limits", "Set an organization's limits (superadmin); options not given stay");
  set->add_option("org", a.set.org, "Organization id or name")->required();
  set->add_option("--max-sandboxes", a.set.max_sandboxes, "Sandboxes not deleted (stopped ones count)");
  set->add_option("--max-cpus", a.set.max_cpus, "CPUs of its running sandboxes together");
  set->add_option("--max-memory-mb", a.set.max_memory_mb, "Memory (MiB) of its running sandboxes together");
  set->add_option("--max-volumes", a.set.max_volumes, "Volumes not deleted");
  set->add_option("--max-snapshots", a.set.max_snapshots, "Snapshots not deleted");
  set->add_option("--allowed-image", a.set.allowed_images,
                  "Image pattern it may start ('*' any run of characters; repeatable: the list replaces the old one)")
      ->allow_extra_args(false);
  set->add_option("--allowed-runtime", a.set.allowed_runtimes,
                  "Runtime its sandboxes may run on (repeatable: the list replaces the old one; "
                  "`--allowed-runtime gvisor` requires gVisor)")
      ->allow_extra_args(false)
      ->check(CLI::IsMember({"runc", "gvisor"}));
  set->add_option("--reset", a.set.reset, "Put this limit back to the server's default (repeatable)")
      ->allow_extra_args(false)
      ->check(CLI::IsMember({"max_sandboxes", "max_cpus", "max_memory_mb", "allowed_images", "max_volumes",
                             "max_snapshots", "allowed_runtimes"}));
  set->add_flag("--json", as_json, "Print the API's JSON");
  set->callback([&] {
    a.set.json = as_json;
    status = sc::cmd_org_set_limits(a.set);
  });

  auto* stop = org->add_subcommand("stop-all", "The kill switch: stop every started sandbox now and refuse new and "
                                               "restarted ones until `org lift`; exit 1 if one could not be stopped");
  stop->add_option("org", a.org, org_help);
  stop->add_flag("--json", as_json, "Print the API's JSON ({org_id, stopped, failed})");
  stop->callback([&] { status = sc::cmd_org_stop_all(a.org, as_json); });

  auto* lift = org->add_subcommand("lift", "Lift the kill switch (one the superadmin threw: superadmin only); "
                                           "stopped sandboxes stay stopped");
  lift->add_option("org", a.org, org_help);
  lift->callback([&] { status = sc::cmd_org_lift(a.org); });
}

// ls, get and rm of the organization's named resources (volume, snapshot): the same three commands,
// with `noun` in their help and `rm_help` saying what a delete removes and when it is refused.
void add_named_commands(CLI::App* cmd, const sc::named_resource& r, const std::string& noun, const std::string& rm_help,
                        std::vector<std::string>& names, int& status, bool& as_json) {
  std::string title = noun;
  title.front() = static_cast<char>(std::toupper(static_cast<unsigned char>(title.front())));
  auto* ls = cmd->add_subcommand("ls", "List " + noun + "s");
  ls->alias("list");
  ls->add_flag("--json", as_json, "Print the API's JSON");
  ls->callback([&status, &as_json, res = &r] { status = sc::cmd_named_ls(*res, as_json); });
  auto* get = cmd->add_subcommand("get", "Show one " + noun);
  get->add_option("name", names, title + " name or id")->required()->expected(1);
  get->add_flag("--json", as_json, "Print the API's JSON");
  get->callback([&status, &as_json, &names, res = &r] { status = sc::cmd_named_get(*res, names.front(), as_json); });
  auto* rm = cmd->add_subcommand("rm", rm_help);
  rm->alias("delete");
  rm->add_option("names", names, title + " names or ids")->required();
  rm->callback([&status, &names, res = &r] { status = sc::cmd_named_rm(*res, names); });
}

// volume …: the organization's named volumes (mounted with --volume on `sandbox create` and `new`).
void add_volume_commands(CLI::App& app, std::vector<std::string>& names, int& status, bool& as_json) {
  auto* volume = app.add_subcommand("volume", "Manage the organization's named volumes");
  volume->require_subcommand(1);
  auto* create = volume->add_subcommand("create", "Create a volume and print its id");
  create->add_option("name", names, "Name of the volume")->required()->expected(1);
  create->add_flag("--json", as_json, "Print the API's JSON");
  create->callback([&] { status = sc::cmd_volume_create(names.front(), as_json); });
  add_named_commands(volume, sc::volume_resource, "volume",
                     "Delete volumes and their data (refused while a sandbox mounts one)", names, status, as_json);
}

// snapshot …: the organization's snapshots (created from with --snapshot on `sandbox create` and `new`).
void add_snapshot_commands(CLI::App& app, std::vector<std::string>& names, int& status, bool& as_json) {
  auto* snapshot = app.add_subcommand("snapshot", "Manage the organization's snapshots of sandboxes");
  snapshot->require_subcommand(1);
  auto* create = snapshot->add_subcommand(
      "create", "Commit a sandbox's filesystem (not its memory or processes) as a snapshot and print its id");
  create->add_option("args", names, "Sandbox id or name, then the snapshot's name")->required()->expected(2);
  create->add_flag("--json", as_json, "Print the API's JSON");
  create->callback([&] { status = sc::cmd_snapshot_create(names[0], names[1], as_json); });
  add_named_commands(snapshot, sc::snapshot_resource, "snapshot",
                     "Delete snapshots (refused while a sandbox created from one exists)", names, status, as_json);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sandfort: create and use Sandfort sandboxes from the command line.\n"
               "Configuration: `sandfort login`, or SANDFORT_BASE_URL and SANDFORT_API_KEY.",
               "sandfort"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("sandfort ") + sandfort::version);
  int status = 0;
  bool as_json = false;
  auto json_flag = [&](CLI::App* cmd) { cmd->add_flag("--json", as_json, "Print the API's JSON"); };

  sc::login_options login_opts;
  auto* login = app.add_subcommand(
      "login",
      "Store the base URL and API key (read from stdin) after checking them; or, with --oidc, sign in "
      "through an OpenID Connect issuer (device flow) and store the refresh token");
  login->add_option("--url,--base-url", login_opts.base_url, "URL of sandfortd (instead of asking / the configured one)");
  login->add_flag("--api-key-stdin", login_opts.api_key_stdin,
                  "Read the API key from stdin, ask nothing (`echo $KEY | sandfort login --url URL --api-key-stdin`)");
  login->add_option("--oidc", login_opts.oidc_issuer, "Issuer URL: sign in there with the device authorization grant");
  login->add_option("--client-id", login_opts.client_id, "The CLI's (public) client id at the issuer");
  login->add_option("--scope", login_opts.scope, "Scopes to ask for")->capture_default_str();
  login->add_option("--resource", login_opts.resource,
                    "RFC 8707 resource indicator of sandfortd at the issuer (default: none, the issuer's default)");
  login->add_option("--audience", login_opts.audience,
                    "`audience` parameter for issuers that take one (Auth0 style; default: none)");
  login->callback([&] { status = sc::cmd_login(login_opts); });
  app.add_subcommand("logout", "Forget the stored credentials (and revoke an OIDC refresh token)")
      ->callback([&] { status = sc::cmd_logout(); });
  auto* whoami = app.add_subcommand("whoami", "Show who the credentials belong to: user, organization, role, auth method");
  json_flag(whoami);
  whoami->callback([&] { status = sc::cmd_whoami(as_json); });

  // sandbox …
  auto* sandbox = app.add_subcommand("sandbox", "Manage sandboxes");
  sandbox->require_subcommand(1);
  sc::create_options create;
  auto* create_cmd = sandbox->add_subcommand("create", "Create a sandbox and print its id");
  create_cmd->add_option("name", create.name, "Name of the sandbox");
  create_cmd->add_flag("--wait", create.wait, "Answer once the sandbox is started");
  add_create_options(create_cmd, create);
  json_flag(create_cmd);
  create_cmd->callback([&] {
    create.json = as_json;
    status = sc::cmd_sandbox_create(create);
  });
  auto* ls = sandbox->add_subcommand("ls", "List sandboxes");
  ls->alias("list");
  json_flag(ls);
  ls->callback([&] { status = sc::cmd_sandbox_ls(as_json); });
  std::string id;
  auto* get = sandbox->add_subcommand("get", "Show one sandbox");
  get->add_option("id", id, "Sandbox id or name")->required();
  json_flag(get);
  get->callback([&] { status = sc::cmd_sandbox_get(id, as_json); });
  std::vector<std::string> ids;
  auto* rm = sandbox->add_subcommand("rm", "Delete sandboxes");
  rm->alias("delete");
  rm->add_option("ids", ids, "Sandbox ids or names")->required();
  rm->callback([&] { status = sc::cmd_sandbox_rm(ids); });
  struct lifecycle_command {
    const char* name;
    const char* help;
  };
  for (auto [name, help] : {lifecycle_command{"stop", "Stop a sandbox"},
                            lifecycle_command{"start", "Start a stopped sandbox"},
                            lifecycle_command{"pause", "Pause a started sandbox: freeze its processes, memory kept"},
                            lifecycle_command{"resume", "Resume a paused sandbox where it was"}}) {
    auto* cmd = sandbox->add_subcommand(name, help);
    cmd->add_option("id", id, "Sandbox id or name")->required();
    json_flag(cmd);
    cmd->callback([&, action = std::string(name)] { status = sc::cmd_sandbox_lifecycle(id, action, as_json); });
  }

  // exec ID CMD… : everything after the id is the command's, options included.
  std::optional<int> timeout_s;
  std::string cwd;
  auto* exec = app.add_subcommand("exec", "Run a command (argv, no shell) in a sandbox; exits with its status");
  exec->footer("Usage: sandfort exec [-i] [--timeout S] [--cwd DIR] SANDBOX [--] COMMAND [ARGS...]");
  exec->prefix_command();
  exec->add_option("--timeout", timeout_s, "Seconds before the command is killed (server default 60)");
  exec->add_option("--cwd", cwd, "Working directory inside the sandbox");
  bool send_stdin = false;
  exec->add_flag("-i,--stdin", send_stdin, "Read all of stdin and give it to the command");
  exec->callback([&] {
    sc::refuse_unknown_option(*exec, exec->remaining());
    status = sc::cmd_exec(exec->remaining(), timeout_s, cwd, send_stdin);
  });

  // The current-sandbox workflow.
  sc::create_options fresh;
  auto* new_cmd = app.add_subcommand("new", "Create a sandbox, print its id and make it the current one");
  new_cmd->add_option("--name", fresh.name, "Name of the sandbox");
  add_create_options(new_cmd, fresh);
  new_cmd->callback([&] { status = sc::cmd_new(fresh); });
  std::string run_id;
  auto* run = app.add_subcommand("run", "Run a shell command in the sandbox's persistent shell; exits with its status");
  run->footer("Usage: sandfort run [--id ID] [--timeout S | --background] \"COMMAND\"");
  run->prefix_command();
  run->add_option("--id", run_id, "Sandbox (default: the current one)");
  auto* run_timeout = run->add_option("--timeout", timeout_s, "Seconds before the command is killed (server default 60)");
  bool background = false;
  run->add_flag("-b,--background", background,
                "Start it as a background command (not in the shell: no timeout) and print its id for `sandfort logs`")
      ->excludes(run_timeout);
  run->callback([&] {
    sc::refuse_unknown_option(*run, run->remaining());
    status = background ? sc::cmd_run_background(run_id, run->remaining())
                        : sc::cmd_run(run_id, run->remaining(), timeout_s);
  });
  auto* rm_current = app.add_subcommand("rm", "Delete the current sandbox (or --id)");
  rm_current->add_option("--id", run_id, "Sandbox to delete instead of the current one");
  rm_current->callback([&] { status = sc::cmd_rm_current(run_id); });

  std::string src, dst;
  auto* cp = app.add_subcommand("cp", "Copy a file or directory between this machine and a sandbox (SANDBOX:/path)");
  cp->add_option("src", src, "Source: a local path or SANDBOX:/path")->required();
  cp->add_option("dst", dst, "Destination: a local path (- for stdout) or SANDBOX:/path")->required();
  cp->callback([&] { status = sc::cmd_cp(src, dst); });

  std::vector<std::string> logs_args;
  bool follow = false;
  auto* logs = app.add_subcommand("logs", "Print a background command's output (`sandfort run --background` starts one)");
  logs->add_option("args", logs_args, "[SANDBOX] COMMAND: the sandbox's id or name (default: the current one), then "
                                      "the command's id (cmd-…)")
      ->required()
      ->expected(1, 2);
  logs->add_flag("-f,--follow", follow, "Keep printing new output until the command exits; exit with its status");
  logs->callback([&] { status = sc::cmd_logs(logs_args, follow); });

  std::string shell_command;
  auto* shell = app.add_subcommand("shell", "Open an interactive terminal in a sandbox; exits with the shell's status");
  shell->add_option("id", id, "Sandbox id or name")->required();
  shell->add_option("-c,--command", shell_command, "Program to run instead of the login shell");
  shell->callback([&] { status = sc::cmd_shell(id, shell_command); });

  int port = 0;
  auto* preview = app.add_subcommand("preview", "Print the preview URL and token of a sandbox port");
  preview->add_option("id", id, "Sandbox id or name")->required();
  preview->add_option("port", port, "Port inside the sandbox")->required()->check(CLI::Range(1, 65535));
  int preview_wait_s = 0;
  preview->add_option("--wait", preview_wait_s, "Seconds to wait for PORT to be listening first (a server just started)")
      ->check(CLI::Range(0, 3600));
  json_flag(preview);
  preview->callback([&] { status = sc::cmd_preview(id, port, preview_wait_s, as_json); });

  audit_args audit_state;
  add_audit_commands(app, audit_state, status, as_json);
  org_args org_state;
  add_org_commands(app, org_state, status, as_json);
  std::vector<std::string> volume_names;
  add_volume_commands(app, volume_names, status, as_json);
  std::vector<std::string> snapshot_names;
  add_snapshot_commands(app, snapshot_names, status, as_json);
  sc::add_admin_commands(app, status, as_json);

  std::string shell_name;
  auto* completion = app.add_subcommand("completion", "Print a shell completion script: eval \"$(sandfort completion bash)\"");
  completion->add_option("shell", shell_name, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
  completion->callback([&] { status = sc::cmd_completion(shell_name); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (auto why = sc::explain_usage_error(app, {argv + 1, argv + argc}); !why.empty()) {
      std::cerr << why << "\n";
      return 2;
    }
    app.exit(e);
    return 2;
  } catch (const sc::failure& e) {
    std::string_view what = e.what();
    std::cerr << (what.starts_with("error:") || what.starts_with("sandfort ") ? "" : "sandfort: ") << what << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "sandfort: " << e.what() << "\n";
    return 1;
  }
  return status;
}
