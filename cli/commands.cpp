#include "commands.hpp"

#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <optional>
#include <set>
#include <thread>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api_client.hpp"
#include "config.hpp"
#include "failure.hpp"
#include "login_check.hpp"
#include "oidc.hpp"

namespace sandfort::cli {
using nlohmann::json;

namespace {

std::string sandbox_path(const std::string& id) { return "/v1/sandboxes/" + url_encode(id); }

// The ports listening in the sandbox that a preview URL reaches (not those on loopback only);
// nullopt when they cannot be read (`run` then says nothing about previews).
std::optional<std::set<int>> previewable_ports(api_client& client, const std::string& id) {
  try {
    json ports = client.call(verb::get, sandbox_path(id) + "/ports");
    std::set<int> out;
    if (ports.contains("items") && ports["items"].is_array())
      for (const auto& p : ports["items"])
        if (p.value("previewable", false) && p.contains("port") && p["port"].is_number_integer())
          out.insert(p["port"].get<int>());
    return out;
  } catch (const failure&) {
    return std::nullopt;
  }
}

// A link that opens the port's preview as it is, from curl, a script or a browser: the API's
// `link` (the token in it for a private preview).
std::string preview_link(api_client& client, const std::string& id, int port) {
  return cell(client.call(verb::get, sandbox_path(id) + "/preview/" + std::to_string(port)), "link");
}

void print_json(const json& j) { std::cout << j.dump(2) << "\n"; }

void print_sandbox(const json& s) {
  print_fields(s, {"id", "name", "state", "snapshot", "runtime", "created_at", "updated_at", "expires_at", "ttl_s",
                   "idle_timeout_s", "resources", "egress_allowlist", "labels", "env_keys", "workdir", "volumes",
                   "preview_url_template", "error_message"});
}

std::string prompt_line(const std::string& prompt, bool secret) {
  std::cerr << prompt << std::flush;
  termios saved{};
  bool hide = secret && ::isatty(STDIN_FILENO) && ::tcgetattr(STDIN_FILENO, &saved) == 0;
  if (hide) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  }
  std::string line;
  bool got = static_cast<bool>(std::getline(std::cin, line));
  if (hide) {
    ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    std::cerr << "\n";
  }
  if (!got) throw failure("no input: login reads the base URL and then the API key from stdin");
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  while (!line.empty() && line.front() == ' ') line.erase(0, 1);
  return line;
}

// All of stdin, surrounding whitespace removed: a key piped by a script, with or without a newline.
std::string read_key_from_stdin() {
  std::string all{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  const char* space = " \t\r\n";
  auto first = all.find_first_not_of(space);
  if (first == std::string::npos) throw failure("--api-key-stdin: stdin held no API key");
  auto key = all.substr(first, all.find_last_not_of(space) - first + 1);
  if (bare_api_key(key).find_first_of(space) != std::string::npos)
    throw failure("--api-key-stdin: stdin must hold the API key alone (it holds more than one word)");
  return key;
}

// What the final event of a streamed command said.
struct stream_end {
  int exit_code = 0;
  bool session_restarted = false;  // a session's shell ended (or had ended): a fresh one runs next
};

// Runs a streamed command (SSE) and copies its output as it comes.
stream_end stream_command(api_client& client, const std::string& target, const json& body) {
  std::optional<int> exit_code;
  bool restarted = false;
  std::string error_text;
  sse_parser parser([&](const std::string& event, const std::string& data) {
    auto j = json::parse(data, nullptr, false);
    if (event == "stdout" || event == "stderr") {
      std::string chunk = j.is_object() && j.contains("data") && j["data"].is_string() ? j["data"].get<std::string>() : data;
      std::FILE* out = event == "stdout" ? stdout : stderr;
      std::fwrite(chunk.data(), 1, chunk.size(), out);
      std::fflush(out);
    } else if (event == "exit") {
      exit_code = j.is_object() && j.contains("exit_code") && j["exit_code"].is_number_integer() ? j["exit_code"].get<int>() : 1;
      if (j.is_object() && j.value("timed_out", false)) std::cerr << "sandfort: the command timed out\n";
      if (j.is_object() && j.value("truncated", false)) std::cerr << "sandfort: output was truncated\n";
      restarted = j.is_object() && j.value("session_restarted", false);
    } else if (event == "error") {
      if (j.is_object() && j.contains("error") && j["error"].is_object())
        error_text = "error: " + j["error"].value("message", data);
      else if (j.is_object() && j.contains("message"))
        error_text = "error: " + j.value("message", data);
      else
        error_text = "error: " + data;
    }
  });
  request_spec spec;
  spec.method = verb::post;
  spec.target = target;
  spec.body = body.dump();
  spec.content_type = "application/json";
  spec.accept = "text/event-stream";
  spec.on_chunk = [&](std::string_view piece) { parser.feed(piece); };
  response r = client.send(spec);
  if (r.status / 100 != 2) throw_api_error(r);
  if (!error_text.empty()) throw failure(error_text);
  if (!exit_code) throw failure("the stream ended without the command's exit status");
  return {*exit_code, restarted};
}

// A preview line for each port that was not listening before, on stderr so that stdout stays the
// command's. A server started in the background may bind a moment after its command returns:
// `patient` looks a few times.
void print_opened_ports(api_client& client, const std::string& id, const std::set<int>& before, bool patient) {
  std::set<int> opened;
  for (int attempt = 0; attempt < (patient ? 5 : 1) && opened.empty(); ++attempt) {
    if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto after = previewable_ports(client, id);
    if (!after) break;
    std::set_difference(after->begin(), after->end(), before.begin(), before.end(),
                        std::inserter(opened, opened.end()));
  }
  for (int port : opened) {
    try {
      std::cerr << "preview: port " << port << ": " << preview_link(client, id, port) << "\n";
    } catch (const failure& e) {
      std::cerr << "preview: port " << port << ": no URL (" << e.what() << ")\n";
    }
  }
}

std::string joined_words(const std::vector<std::string>& words, const char* usage) {
  std::vector<std::string> w = words;
  if (!w.empty() && w.front() == "--") w.erase(w.begin());
  if (w.empty()) throw failure(usage, 2);
  std::string command;
  for (const auto& word : w) command += (command.empty() ? "" : " ") + word;
  return command;
}

json create_body(const create_options& o) {
  json body = {{"wait", o.wait}};
  if (!o.name.empty()) body["name"] = o.name;
  if (!o.snapshot.empty()) body["snapshot"] = o.snapshot;
  if (!o.egress.empty()) body["egress_allowlist"] = o.egress;
  if (!o.env.empty()) {
    json env = json::object();
    for (const auto& kv : o.env) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) throw failure("--env takes KEY=VALUE, got \"" + kv + "\"", 2);
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    body["env"] = env;
  }
  if (o.cpus || o.memory_mb) {
    json res = json::object();
    if (o.cpus) res["cpus"] = *o.cpus;
    if (o.memory_mb) res["memory_mb"] = *o.memory_mb;
    body["resources"] = res;
  }
  if (o.ttl_s) body["ttl_s"] = *o.ttl_s;
  if (o.idle_timeout_s) body["idle_timeout_s"] = *o.idle_timeout_s;
  if (!o.workdir.empty()) body["workdir"] = o.workdir;
  if (!o.runtime.empty()) body["runtime"] = o.runtime;
  if (!o.volumes.empty()) {
    json mounts = json::array();
    for (const auto& spec : o.volumes) mounts.push_back(volume_mount(spec));
    body["volumes"] = mounts;
  }
  return body;
}

std::string current_or(const std::string& id) {
  if (!id.empty()) return id;
  if (auto cur = current_sandbox()) return *cur;
  throw failure("no current sandbox: run `sandfort new` first or pass --id");
}

std::string without_trailing_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

std::string describe(const json& who) {
  return cell(who, "principal_name") + " (" + cell(who, "role") + " in " + cell(who, "org") + ")";
}

int login_with_api_key(const login_options& o) {
  settings old = load_settings();
  std::string url = o.base_url;
  if (url.empty() && o.api_key_stdin) {
    // Nothing is asked: stdin holds the key only (as `docker login --password-stdin`).
    url = old.base_url;
    if (url.empty()) throw failure("--api-key-stdin needs --url URL (or a URL from an earlier login)", 2);
  }
  if (url.empty()) {
    std::string default_url = old.base_url.empty() ? "http://127.0.0.1:8080" : old.base_url;
    url = prompt_line("Base URL [" + default_url + "]: ", false);
    if (url.empty()) url = default_url;
  }
  url = without_trailing_slash(url);
  std::string typed = o.api_key_stdin ? read_key_from_stdin() : prompt_line("API key: ", true);
  std::string key = bare_api_key(typed);
  if (key.empty()) throw failure("an API key is needed (ask your organization's admin for one)");
  if (key != typed)
    std::cerr << "note: using the key without the \"Bearer \" in front of it: the CLI sends that itself\n";
  check_key_shape(key);
  json who = whoami_for_login(url, key);
  save_settings({url, key, std::nullopt});
  std::cout << "Logged in to " << url << " as " << describe(who) << "; credentials saved in " << config_file().string()
            << "\n";
  return 0;
}

// Who the daemon says the new token belongs to; a failure that says nothing was saved otherwise.
json check_new_token(const std::string& url, const std::string& token, const std::string& issuer) {
  api_client client(url, fixed_credentials(token));
  client.set_unreachable_hint(login_unreachable_hint);
  request_spec spec;
  spec.target = "/v1/whoami";
  std::string prefix = "signed in at " + issuer + ", but nothing was saved: ";
  response r;
  try {
    r = client.send(spec);
  } catch (const failure& e) {
    throw failure(prefix + e.what());
  }
  if (r.status == 401) {
    auto refusal = json::parse(r.body, nullptr, false);
    std::string why = refusal.is_object() && refusal.contains("error") && refusal["error"].is_object()
                          ? refusal["error"].value("message", "refused")
                          : "HTTP 401";
    throw failure(prefix + url + " does not accept the token: " + why + " (request " + r.request_id +
                  ")\nhint: is the issuer configured in sandfortd's \"oidc\" section, with this audience?");
  }
  try {
    if (r.status / 100 != 2) throw_api_error(r);
  } catch (const failure& e) {
    throw failure(prefix + e.what());
  }
  auto who = json::parse(r.body, nullptr, false);
  if (!who.is_object()) throw failure(prefix + "GET /v1/whoami answered something that is not JSON");
  return who;
}

// The device flow at the issuer, then a check of the new token against the daemon before
// anything is stored: a sign-in the daemon does not accept is not kept.
int login_with_oidc(const login_options& o) {
  if (o.client_id.empty()) throw failure("--oidc needs --client-id (the CLI's public client at the issuer)", 2);
  std::string url = o.base_url;
  if (url.empty()) url = load_settings().base_url;
  if (url.empty()) throw failure("--base-url is needed: the URL of sandfortd (or set SANDFORT_BASE_URL)", 2);
  url = without_trailing_slash(url);

  oidc::endpoints ep = oidc::discover(o.oidc_issuer);
  oidc::tokens t = oidc::device_flow(ep, {o.client_id, o.scope, o.resource, o.audience}, std::cerr);
  json who = check_new_token(url, t.access_token, ep.issuer);
  oidc_session s{ep.issuer, o.client_id, ep.token_endpoint, ep.revocation_endpoint, o.scope, o.resource,
                 o.audience, t.access_token, t.refresh_token, t.expires_at};
  {
    credentials_lock lock;
    save_settings({url, "", s});
  }
  std::cout << "Logged in to " << url << " as " << describe(who) << " through " << ep.issuer
            << "; credentials saved in " << config_file().string() << "\n";
  if (t.refresh_token.empty())
    std::cerr << "note: the issuer sent no refresh token (ask for the offline_access scope): when the access token "
                 "expires, log in again\n";
  if (std::getenv("SANDFORT_API_KEY")) std::cerr << "note: SANDFORT_API_KEY is set in the environment and takes precedence\n";
  return 0;
}

}  // namespace

std::string cell(const json& v, const char* key) {
  if (!v.contains(key) || v[key].is_null()) return "-";
  if (v[key].is_string()) return v[key].get<std::string>();
  return v[key].dump();
}

json list_all(api_client& client, const std::string& path) {
  json all = json::array();
  std::string cursor;
  for (;;) {
    std::string target = path + "?limit=1000";
    if (!cursor.empty()) target += "&cursor=" + url_encode(cursor);
    json page = client.call(verb::get, target);
    for (auto& item : page["items"]) all.push_back(item);
    if (!page.contains("next_cursor") || !page["next_cursor"].is_string()) break;
    cursor = page["next_cursor"].get<std::string>();
  }
  return all;
}

void print_listing(api_client& client, const std::string& path, const std::vector<column>& columns, bool as_json) {
  json all = list_all(client, path);
  if (as_json) {
    print_json(json{{"items", all}});
    return;
  }
  std::vector<std::vector<std::string>> rows(1);
  for (const auto& c : columns) rows.front().emplace_back(c.header);
  for (const auto& item : all) {
    auto& row = rows.emplace_back();
    for (const auto& c : columns) row.push_back(cell(item, c.key));
  }
  print_table(rows);
}

void print_created(const json& created, bool as_json) {
  if (as_json)
    print_json(created);
  else
    std::cout << cell(created, "id") << "\n";
}

void print_fields(const json& v, const std::vector<const char*>& keys) {
  for (const char* key : keys)
    if (v.contains(key)) std::cout << key << ": " << cell(v, key) << "\n";
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

int cmd_login(const login_options& o) {
  if (o.oidc_issuer.empty()) {
    if (!o.client_id.empty() || !o.resource.empty() || !o.audience.empty())
      throw failure("--client-id, --resource and --audience go with --oidc ISSUER_URL", 2);
    return login_with_api_key(o);
  }
  if (o.api_key_stdin) throw failure("--api-key-stdin is for an API key; --oidc signs in at the issuer", 2);
  return login_with_oidc(o);
}

// The refresh token is revoked at the issuer after the file is gone, so that a failing or slow
// issuer never leaves the credentials behind.
int cmd_logout() {
  settings stored;
  bool removed = false;
  {
    credentials_lock lock;
    stored = load_file_settings();
    removed = remove_settings();
  }
  std::cout << (removed ? "Logged out: removed " + config_file().string() : std::string("Not logged in: no saved credentials"))
            << "\n";
  if (stored.oidc && !stored.oidc->refresh_token.empty()) {
    std::string why_not = oidc::revoke(*stored.oidc);
    if (why_not.empty())
      std::cout << "Revoked the refresh token at " << stored.oidc->issuer << "\n";
    else
      std::cerr << "note: the refresh token could not be revoked at " << stored.oidc->issuer << ": " << why_not << "\n";
  }
  if (std::getenv("SANDFORT_API_KEY")) std::cerr << "note: SANDFORT_API_KEY is still set in the environment\n";
  return 0;
}

int cmd_whoami(bool as_json) {
  api_client client = connect_api();
  json who = client.call(verb::get, "/v1/whoami");
  if (as_json) {
    print_json(who);
    return 0;
  }
  std::cout << "url: " << client.base_url() << "\n";
  print_fields(who, {"org", "org_id", "principal", "principal_name", "role", "superadmin", "auth", "issuer"});
  return 0;
}

int cmd_sandbox_create(const create_options& o) {
  api_client client = connect_api();
  json body = create_body(o);
  print_created(client.call(verb::post, "/v1/sandboxes", &body), o.json);
  return 0;
}

int cmd_sandbox_ls(bool as_json) {
  api_client client = connect_api();
  print_listing(client, "/v1/sandboxes",
                {{"ID", "id"}, {"NAME", "name"}, {"STATE", "state"}, {"RUNTIME", "runtime"}, {"SNAPSHOT", "snapshot"},
                 {"CREATED", "created_at"}},
                as_json);
  return 0;
}

int cmd_sandbox_get(const std::string& id, bool as_json) {
  api_client client = connect_api();
  json sbx = client.call(verb::get, sandbox_path(id));
  if (as_json)
    print_json(sbx);
  else
    print_sandbox(sbx);
  return 0;
}

int cmd_sandbox_rm(const std::vector<std::string>& ids) {
  api_client client = connect_api();
  for (const auto& id : ids) {
    client.call(verb::delete_, sandbox_path(id));
    if (current_sandbox() == id) clear_current_sandbox();
    std::cout << "deleted " << id << "\n";
  }
  return 0;
}

int cmd_sandbox_lifecycle(const std::string& id, const std::string& action, bool as_json) {
  api_client client = connect_api();
  json sbx = client.call(verb::post, sandbox_path(id) + "/" + action);
  if (as_json)
    print_json(sbx);
  else
    std::cout << cell(sbx, "id") << " " << cell(sbx, "state") << "\n";
  return 0;
}

int cmd_exec(std::vector<std::string> args, std::optional<int> timeout_s, const std::string& cwd, bool send_stdin) {
  if (!args.empty() && args.front() == "--") args.erase(args.begin());
  if (args.empty()) throw failure("usage: sandfort exec SANDBOX COMMAND [ARGS...]", 2);
  std::string id = args.front();
  args.erase(args.begin());
  if (!args.empty() && args.front() == "--") args.erase(args.begin());
  if (args.empty()) throw failure("usage: sandfort exec SANDBOX COMMAND [ARGS...] (no command given)", 2);
  api_client client = connect_api();
  json body = {{"argv", args}};
  if (timeout_s) body["timeout_s"] = *timeout_s;
  if (!cwd.empty()) body["cwd"] = cwd;
  if (send_stdin) {
    std::ostringstream input;
    input << std::cin.rdbuf();
    body["stdin"] = input.str();
  }
  return stream_command(client, sandbox_path(id) + "/process/exec", body).exit_code;
}

int cmd_new(const create_options& o) {
  api_client client = connect_api();
  create_options waited = o;
  waited.wait = true;
  json body = create_body(waited);
  json sbx = client.call(verb::post, "/v1/sandboxes", &body);
  std::string id = cell(sbx, "id");
  set_current_sandbox(id);
  std::cout << id << "\n";
  return 0;
}

int cmd_run(const std::string& id_option, const std::vector<std::string>& words, std::optional<int> timeout_s) {
  std::string command = joined_words(words, "usage: sandfort run [--id ID] \"COMMAND\"");
  std::string id = current_or(id_option);
  api_client client = connect_api();
  json body = {{"command", command}};
  if (timeout_s) body["timeout_s"] = *timeout_s;
  // No expose call: a port the command opened is reachable at once, and its URL is what the caller
  // hands on. Ports that were listening before are not the command's.
  auto before = previewable_ports(client, id);
  stream_end end = stream_command(client, sandbox_path(id) + "/exec", body);
  // The shell's state is what `run` is for: its loss must not go unnoticed.
  if (end.session_restarted)
    std::cerr << "sandfort: the shell of " << id << " was restarted (a command ended it, e.g. `exit`): the "
              << "directory, variables and background jobs of earlier `run`s are gone\n";
  if (before) print_opened_ports(client, id, *before, command.find('&') != std::string::npos);
  return end.exit_code;
}

int cmd_run_background(const std::string& id_option, const std::vector<std::string>& words) {
  std::string command = joined_words(words, "usage: sandfort run --background [--id ID] \"COMMAND\"");
  std::string id = current_or(id_option);
  api_client client = connect_api();
  auto before = previewable_ports(client, id);
  json body = {{"command", command}};
  json started = client.call(verb::post, sandbox_path(id) + "/commands", &body);
  std::string command_id = cell(started, "id");
  // stdout: the id alone, for scripts (`cmd=$(sandfort run --background …)`).
  std::cout << command_id << "\n" << std::flush;
  std::cerr << "started " << command_id << " (pid " << cell(started, "pid") << ") in " << id
            << "; its output: sandfort logs " << id << " " << command_id << " (-f to follow it)\n";
  if (before) print_opened_ports(client, id, *before, true);
  return 0;
}

int cmd_rm_current(const std::string& id_option) {
  std::string id = current_or(id_option);
  return cmd_sandbox_rm({id});
}

int cmd_logs(const std::vector<std::string>& args, bool follow) {
  // SANDBOX COMMAND, or COMMAND alone in the current sandbox.
  std::string id = args.size() == 2 ? args[0] : current_or("");
  const std::string& command_id = args.back();
  api_client client = connect_api();
  std::string target = sandbox_path(id) + "/commands/" + url_encode(command_id) + "/logs";
  if (!follow) {
    json logs = client.call(verb::get, target);
    std::cout << logs.value("stdout", "") << std::flush;
    std::cerr << logs.value("stderr", "") << std::flush;
    return 0;
  }
  std::optional<int> exit_code;
  sse_parser parser([&](const std::string& event, const std::string& data) {
    auto j = json::parse(data, nullptr, false);
    if (event == "stdout" || event == "stderr") {
      std::string chunk = j.is_object() && j.contains("data") && j["data"].is_string() ? j["data"].get<std::string>() : data;
      std::FILE* out = event == "stdout" ? stdout : stderr;
      std::fwrite(chunk.data(), 1, chunk.size(), out);
      std::fflush(out);
    } else if (event == "exit" && j.is_object() && j.contains("exit_code") && j["exit_code"].is_number_integer()) {
      exit_code = j["exit_code"].get<int>();
    }
  });
  request_spec spec;
  spec.target = target + "?follow=true";
  spec.accept = "text/event-stream";
  spec.on_chunk = [&](std::string_view piece) { parser.feed(piece); };
  response r = client.send(spec);
  if (r.status / 100 != 2) throw_api_error(r);
  return exit_code.value_or(0);
}

int cmd_preview(const std::string& id, int port, int wait_s, bool as_json) {
  api_client client = connect_api();
  // A server started a moment ago may not have bound yet: --wait looks until it has, so that the
  // link printed opens at once instead of answering 502.
  if (wait_s > 0) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
    for (;;) {
      auto listening = previewable_ports(client, id);
      if (!listening || listening->count(port)) break;  // unreadable: the preview call says why
      if (std::chrono::steady_clock::now() >= deadline)
        throw failure("port " + std::to_string(port) + " of " + id + " is not listening after " +
                      std::to_string(wait_s) + " s (a server bound to 127.0.0.1 only is not reachable by a preview)");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  json p = client.call(verb::get, sandbox_path(id) + "/preview/" + std::to_string(port));
  if (as_json) {
    print_json(p);
    return 0;
  }
  std::cout << "link: " << cell(p, "link") << "\n";
  std::cout << "url: " << cell(p, "url") << "\n";
  std::cout << "token: " << cell(p, "token") << "\n";
  if (p.contains("token") && p["token"].is_string())
    std::cout << "header: X-Sandfort-Preview-Token: " << p["token"].get<std::string>() << "\n";
  return 0;
}

}  // namespace sandfort::cli
