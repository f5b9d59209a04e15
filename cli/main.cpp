// sandfort: the command-line client of sandfortd. CLI11 parses; commands.cpp does the work.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.hpp"
#include "failure.hpp"

namespace sc = sandfort::cli;

namespace {

void add_create_options(CLI::App* cmd, sc::create_options& o) {
  cmd->add_option("--snapshot", o.snapshot, "Image to start from (default: the server's default image)");
  cmd->add_option("--egress", o.egress, "Host the sandbox may reach (repeatable; *.suffix and * allowed)")
      ->allow_extra_args(false);
  cmd->add_option("--env", o.env, "Environment variable KEY=VALUE (repeatable)")->allow_extra_args(false);
  cmd->add_option("--cpus", o.cpus, "CPU limit");
  cmd->add_option("--memory", o.memory_mb, "Memory limit in MiB");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sandfort: create and use Sandfort sandboxes from the command line.\n"
               "Configuration: `sandfort login`, or SANDFORT_BASE_URL and SANDFORT_API_KEY.",
               "sandfort"};
  app.require_subcommand(1);
  int status = 0;
  bool as_json = false;
  auto json_flag = [&](CLI::App* cmd) { cmd->add_flag("--json", as_json, "Print the API's JSON"); };

  sc::login_options login_opts;
  auto* login = app.add_subcommand(
      "login",
      "Store the base URL and API key (read from stdin) after checking them; or, with --oidc, sign in "
      "through an OpenID Connect issuer (device flow) and store the refresh token");
  login->add_option("--base-url", login_opts.base_url, "URL of sandfortd (instead of asking / the configured one)");
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
  for (bool start : {false, true}) {
    auto* cmd = sandbox->add_subcommand(start ? "start" : "stop", start ? "Start a stopped sandbox" : "Stop a sandbox");
    cmd->add_option("id", id, "Sandbox id or name")->required();
    json_flag(cmd);
    cmd->callback([&, start] { status = sc::cmd_sandbox_stop_start(id, start, as_json); });
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
  exec->callback([&] { status = sc::cmd_exec(exec->remaining(), timeout_s, cwd, send_stdin); });

  // The current-sandbox workflow.
  sc::create_options fresh;
  auto* new_cmd = app.add_subcommand("new", "Create a sandbox, print its id and make it the current one");
  new_cmd->add_option("--name", fresh.name, "Name of the sandbox");
  add_create_options(new_cmd, fresh);
  new_cmd->callback([&] { status = sc::cmd_new(fresh); });
  std::string run_id;
  auto* run = app.add_subcommand("run", "Run a shell command in the sandbox's persistent shell; exits with its status");
  run->footer("Usage: sandfort run [--id ID] [--timeout S] \"COMMAND\"");
  run->prefix_command();
  run->add_option("--id", run_id, "Sandbox (default: the current one)");
  run->add_option("--timeout", timeout_s, "Seconds before the command is killed (server default 60)");
  run->callback([&] { status = sc::cmd_run(run_id, run->remaining(), timeout_s); });
  auto* rm_current = app.add_subcommand("rm", "Delete the current sandbox (or --id)");
  rm_current->add_option("--id", run_id, "Sandbox to delete instead of the current one");
  rm_current->callback([&] { status = sc::cmd_rm_current(run_id); });

  std::string src, dst;
  auto* cp = app.add_subcommand("cp", "Copy a file or directory between this machine and a sandbox (SANDBOX:/path)");
  cp->add_option("src", src, "Source: a local path or SANDBOX:/path")->required();
  cp->add_option("dst", dst, "Destination: a local path (- for stdout) or SANDBOX:/path")->required();
  cp->callback([&] { status = sc::cmd_cp(src, dst); });

  std::string command_id;
  bool follow = false;
  auto* logs = app.add_subcommand("logs", "Print a background command's output");
  logs->add_option("id", id, "Sandbox id or name")->required();
  logs->add_option("command", command_id, "Command id (cmd-…)")->required();
  logs->add_flag("-f,--follow", follow, "Keep printing new output until the command exits");
  logs->callback([&] { status = sc::cmd_logs(id, command_id, follow); });

  std::string shell_command;
  auto* shell = app.add_subcommand("shell", "Open an interactive terminal in a sandbox; exits with the shell's status");
  shell->add_option("id", id, "Sandbox id or name")->required();
  shell->add_option("-c,--command", shell_command, "Program to run instead of the login shell");
  shell->callback([&] { status = sc::cmd_shell(id, shell_command); });

  int port = 0;
  auto* preview = app.add_subcommand("preview", "Print the preview URL and token of a sandbox port");
  preview->add_option("id", id, "Sandbox id or name")->required();
  preview->add_option("port", port, "Port inside the sandbox")->required()->check(CLI::Range(1, 65535));
  json_flag(preview);
  preview->callback([&] { status = sc::cmd_preview(id, port, as_json); });

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
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const sc::failure& e) {
    std::cerr << (std::string_view(e.what()).starts_with("error:") ? "" : "sandfort: ") << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "sandfort: " << e.what() << "\n";
    return 1;
  }
  return status;
}
