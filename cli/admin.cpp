// The administrator's commands: `sandfort key …` and `sandfort org create` (an organization's API
// keys and new organizations through the API, docs/api.md "Identity", so that giving an agent its
// own key needs no curl), and `sandfort audit checkpoints` (an auditor's copy of the signed
// checkpoints). Registered in one call from main(), into its `org` and `audit` groups.
// A new key's secret is the one thing these commands print on stdout (`KEY=$(sandfort key create)`);
// what it is goes to stderr. The API shows a secret once and stores only its hash.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "api_client.hpp"
#include "commands.hpp"
#include "failure.hpp"

namespace sandfort::cli {
using nlohmann::json;

namespace {

struct key_create_options {
  std::string name;
  std::string role;  // empty: the server's default (member)
  std::string org;   // empty: the caller's own; another one: superadmin only
  std::optional<std::int64_t> expires_in_s;
};

json key_body(const std::string& name, const std::string& role, std::optional<std::int64_t> expires_in_s) {
  json body = {{"name", name}};
  if (!role.empty()) body["role"] = role;
  if (expires_in_s) body["expires_in_s"] = *expires_in_s;
  return body;
}

json create_key(api_client& client, const key_create_options& o) {
  json body = key_body(o.name, o.role, o.expires_in_s);
  const std::string path = o.org.empty() ? "/v1/api-keys" : "/v1/orgs/" + url_encode(o.org) + "/api-keys";
  return client.call(verb::post, path, &body);
}

// The secret alone on stdout; what it is on stderr.
void print_new_key(const json& key) {
  std::cerr << "key " << cell(key, "id") << " (name " << cell(key, "name") << ", role " << cell(key, "role")
            << ", organization " << cell(key, "org_id") << ", expires " << cell(key, "expires_at")
            << "); its secret is shown only now:\n";
  std::cout << cell(key, "key") << "\n";
}

int cmd_key_create(const key_create_options& o, bool as_json) {
  api_client client = connect_api();
  json key = create_key(client, o);
  if (as_json)
    std::cout << key.dump(2) << "\n";
  else
    print_new_key(key);
  return 0;
}

int cmd_key_list(bool as_json) {
  api_client client = connect_api();
  json keys = client.call(verb::get, "/v1/api-keys");
  const json items = keys.value("items", json::array());
  if (as_json) {
    std::cout << json{{"items", items}}.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "ROLE", "CREATED", "EXPIRES", "LAST USED", "REVOKED"}};
  for (const auto& k : items)
    rows.push_back({cell(k, "id"), cell(k, "name"), cell(k, "role"), cell(k, "created_at"), cell(k, "expires_at"),
                    cell(k, "last_used_at"), cell(k, "revoked_at")});
  print_table(rows);
  return 0;
}

int cmd_key_revoke(const std::vector<std::string>& ids) {
  api_client client = connect_api();
  for (const auto& id : ids) {
    client.call(verb::delete_, "/v1/api-keys/" + url_encode(id));
    std::cout << "revoked " << id << "\n";
  }
  return 0;
}

// Two calls: the organization, then its first admin key. If the second fails the organization
// stays (its name is taken): the message says how to get its key.
int cmd_org_create(const std::string& name, const std::string& key_name, bool as_json) {
  api_client client = connect_api();
  json body = {{"name", name}};
  json org = client.call(verb::post, "/v1/orgs", &body);
  const std::string org_id = cell(org, "id");
  json key;
  try {
    key = create_key(client, {key_name, "admin", org_id, std::nullopt});
  } catch (const failure& e) {
    throw failure(std::string(e.what()) + "\nthe organization " + org_id + " (" + name +
                  ") was created without a key: make one with `sandfort key create --org " + org_id +
                  " --name " + key_name + " --role admin`");
  }
  if (as_json) {
    std::cout << json{{"org", org}, {"admin_key", key}}.dump(2) << "\n";
    return 0;
  }
  std::cerr << "organization " << org_id << " (" << cell(org, "name") << ", " << cell(org, "state") << ")\n";
  print_new_key(key);
  return 0;
}

}  // namespace

void add_admin_commands(CLI::App& app, int& status, bool& as_json) {
  // What the commands parse into, alive until main() returns (the callbacks run in app.parse).
  static struct {
    key_create_options create;
    std::vector<std::string> ids;
    std::string org_name, admin_key_name = "admin";
    std::string checkpoints_org, checkpoints_out;
  } a;

  auto* key = app.add_subcommand("key", "Manage the organization's API keys (admin)");
  key->require_subcommand(1);
  auto* mk = key->add_subcommand("create", "Issue an API key and print its secret (shown once) on stdout");
  mk->add_option("--name", a.create.name, "A name to tell the key by, 1-100 characters (e.g. the agent that uses it)")
      ->required();
  mk->add_option("--role", a.create.role, "viewer reads; member also creates and uses sandboxes; admin also manages "
                                        "keys (default: member)")
      ->check(CLI::IsMember({"viewer", "member", "admin"}));
  mk->add_option("--expires-in", a.create.expires_in_s, "Seconds until the key stops working (default: never)")
      ->check(CLI::PositiveNumber);
  mk->add_option("--org", a.create.org, "Organization id or name to issue it in (superadmin only; default: your own)");
  mk->add_flag("--json", as_json, "Print the API's JSON (secret included)");
  mk->footer("Example: AGENT_KEY=$(sandfort key create --name agent-1 --role member)");
  mk->callback([&] { status = cmd_key_create(a.create, as_json); });

  auto* ls = key->add_subcommand("ls", "List the organization's keys (never their secrets), revoked ones included");
  ls->alias("list");
  ls->add_flag("--json", as_json, "Print the API's JSON");
  ls->callback([&] { status = cmd_key_list(as_json); });

  auto* rm = key->add_subcommand("revoke", "Revoke keys: each stops working at once");
  rm->alias("rm");
  rm->add_option("ids", a.ids, "Key ids (key-…)")->required();
  rm->callback([&] { status = cmd_key_revoke(a.ids); });

  // `org create` joins the `org` group main() made.
  CLI::App* org = app.get_subcommand("org");
  auto* org_create = org->add_subcommand(
      "create", "Create an organization and its first admin key (superadmin); prints the key's secret on stdout");
  org_create->add_option("name", a.org_name, "Name of the organization (unique)")->required();
  org_create->add_option("--key-name", a.admin_key_name, "Name of its admin key")->capture_default_str();
  org_create->add_flag("--json", as_json, "Print both of the API's answers: {org, admin_key}");
  org_create->callback([&] { status = cmd_org_create(a.org_name, a.admin_key_name, as_json); });

  // `audit checkpoints` joins the `audit` group: what `audit verify --checkpoints` reads.
  CLI::App* audit = app.get_subcommand("audit");
  auto* cps = audit->add_subcommand(
      "checkpoints", "Save the signed checkpoints (GET /v1/audit/checkpoints, every page) as JSON Lines: printed, or "
                     "appended to the file `audit verify --checkpoints` reads (only those it lacks)");
  cps->add_option("--org", a.checkpoints_org, "Organization id or name (superadmin only; default: your own)");
  cps->add_option("-o,--output", a.checkpoints_out,
                  "Keep them in this file (created 0600): lines already there are never rewritten; a checkpoint the "
                  "server now shows differently from the kept one is reported, exit 1");
  cps->callback([&] { status = cmd_audit_checkpoints(a.checkpoints_org, a.checkpoints_out); });
}

}  // namespace sandfort::cli
