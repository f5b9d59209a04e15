#include "sandbox_bodies.hpp"

#include <set>

#include "json_body.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::api {

using nlohmann::json;

namespace {

// volumes: [{name, mount_path, read_only?}]
result<void> read_volumes(const json& body, std::vector<sandbox::volume_request>& out) {
  if (!body.contains("volumes") || body["volumes"].is_null()) return {};
  const json& list = body["volumes"];
  if (!list.is_array()) return make_error(errc::invalid_argument, "field 'volumes' must be an array");
  for (const auto& item : list) {
    if (!item.is_object())
      return make_error(errc::invalid_argument, "each of 'volumes' must be an object {name, mount_path, read_only?}");
    for (const auto& [key, unused] : item.items())
      if (key != "name" && key != "mount_path" && key != "read_only")
        return make_error(errc::invalid_argument, "volumes: unknown field '" + key + "' (name, mount_path, read_only)");
    sandbox::volume_request v;
    for (auto r : {read(item, "name", v.name), read(item, "mount_path", v.mount_path), read(item, "read_only", v.read_only)})
      if (!r) return make_error(errc::invalid_argument, "volumes: " + r.err().message);
    if (v.name.empty() || v.mount_path.empty())
      return make_error(errc::invalid_argument, "volumes: each needs a name and a mount_path");
    out.push_back(std::move(v));
  }
  return {};
}

// egress_rules: [{host, methods?, paths?}]; absent or null leaves `out` unset.
result<void> read_rules(const json& body, std::optional<std::vector<proxy::egress_rule>>& out) {
  if (!body.contains("egress_rules") || body["egress_rules"].is_null()) return {};
  auto rules = sandbox::egress_rules_from_json(body["egress_rules"]);
  if (!rules) return std::move(rules).err();
  out = std::move(*rules);
  return {};
}

// secrets: ["openai", {"name": "github", "env": "GITHUB_TOKEN"}]
result<void> read_secrets(const json& body, std::vector<sandbox::secret_attachment>& out) {
  if (!body.contains("secrets") || body["secrets"].is_null()) return {};
  const json& list = body["secrets"];
  if (!list.is_array()) return make_error(errc::invalid_argument, "field 'secrets' must be an array");
  for (const auto& item : list) {
    sandbox::secret_attachment a;
    if (item.is_string()) {
      a.name = item.get<std::string>();
    } else if (item.is_object()) {
      for (const auto& [key, unused] : item.items())
        if (key != "name" && key != "env")
          return make_error(errc::invalid_argument, "secrets: unknown field '" + key + "' (name, env)");
      for (auto r : {read(item, "name", a.name), read(item, "env", a.env)})
        if (!r) return make_error(errc::invalid_argument, "secrets: " + r.err().message);
      if (a.name.empty()) return make_error(errc::invalid_argument, "secrets: each needs a name");
    } else {
      return make_error(errc::invalid_argument, "each of 'secrets' must be a name or {name, env?}");
    }
    out.push_back(std::move(a));
  }
  return {};
}

}  // namespace

result<sandbox::create_request> parse_create(std::string_view raw) {
  auto body = parse_object(raw);
  if (!body) return std::move(body).err();
  const json& j = *body;
  sandbox::create_request c;
  json resources = j.contains("resources") && !j["resources"].is_null() ? j["resources"] : json::object();
  if (!resources.is_object()) return make_error(errc::invalid_argument, "field 'resources' must be an object");
  // A field we do not know is refused, not ignored: a caller who writes `cpus` or `image` at the
  // top level must not get a default sandbox and believe it got what it asked for.
  static const std::set<std::string> known = {"name",        "snapshot", "wait",    "env",
                                              "labels",      "egress_allowlist", "ttl_s", "idle_timeout_s",
                                              "user",        "workdir",  "public_preview", "resources",
                                              "volumes",     "runtime",  "egress_deny", "egress_rules",
                                              "secrets"};
  for (const auto& [key, unused] : j.items())
    if (!known.count(key)) return make_error(errc::invalid_argument, "unknown field '" + key + "'");
  for (const auto& [key, unused] : resources.items())
    if (key != "cpus" && key != "memory_mb" && key != "pids" && key != "disk_mb")
      return make_error(errc::invalid_argument, "resources: unknown field '" + key + "' (cpus, memory_mb, pids, disk_mb)");
  for (auto r : {read(j, "name", c.name), read(j, "snapshot", c.snapshot), read(j, "wait", c.wait),
                 read(j, "env", c.env), read(j, "labels", c.labels), read(j, "egress_allowlist", c.egress_allowlist),
                 read(j, "ttl_s", c.ttl_s), read(j, "idle_timeout_s", c.idle_timeout_s),
                 read(j, "user", c.user), read(j, "workdir", c.workdir),
                 read(j, "public_preview", c.public_preview), read(j, "runtime", c.runtime),
                 read(resources, "cpus", c.cpus), read(resources, "memory_mb", c.memory_mb),
                 read(resources, "pids", c.pids), read(resources, "disk_mb", c.disk_mb), read_volumes(j, c.volumes),
                 read(j, "egress_deny", c.egress_deny), read_secrets(j, c.secrets)})
    if (!r) return std::move(r).err();
  std::optional<std::vector<proxy::egress_rule>> rules;
  if (auto r = read_rules(j, rules); !r) return std::move(r).err();
  c.egress_rules = rules.value_or(std::vector<proxy::egress_rule>{});
  for (const char* key : {"egress_allowlist", "egress_deny", "egress_rules"})
    if (j.contains(key) && !j[key].is_null()) c.egress_given = true;
  return c;
}

result<sandbox::update_request> parse_update(std::string_view raw) {
  auto body = parse_object(raw);
  if (!body) return std::move(body).err();
  const json& j = *body;
  for (const auto& [key, unused] : j.items())
    if (key != "labels" && key != "ttl_s" && key != "idle_timeout_s" && key != "egress_allowlist" &&
        key != "egress_deny" && key != "egress_rules")
      return make_error(errc::invalid_argument, "field '" + key +
                                                    "' cannot be changed (labels, ttl_s, idle_timeout_s, "
                                                    "egress_allowlist, egress_deny, egress_rules can)");
  sandbox::update_request u;
  for (auto r : {read(j, "labels", u.labels), read(j, "ttl_s", u.ttl_s), read(j, "idle_timeout_s", u.idle_timeout_s),
                 read(j, "egress_allowlist", u.egress_allowlist), read(j, "egress_deny", u.egress_deny),
                 read_rules(j, u.egress_rules)})
    if (!r) return std::move(r).err();
  return u;
}

result<sandbox::exec_request> parse_exec(std::string_view raw) {
  auto body = parse_object(raw);
  if (!body) return std::move(body).err();
  sandbox::exec_request e;
  for (auto r : {read(*body, "command", e.command), read(*body, "argv", e.argv), read(*body, "cwd", e.cwd),
                 read(*body, "env", e.env), read(*body, "stdin", e.stdin_data), read(*body, "timeout_s", e.timeout_s),
                 read(*body, "binary", e.binary)})
    if (!r) return std::move(r).err();
  return e;
}

result<sandbox::code_run_request> parse_code_run(std::string_view raw) {
  auto body = parse_object(raw);
  if (!body) return std::move(body).err();
  sandbox::code_run_request c;
  for (auto r : {read(*body, "language", c.language), read(*body, "code", c.code), read(*body, "argv", c.argv),
                 read(*body, "env", c.env), read(*body, "timeout_s", c.timeout_s)})
    if (!r) return std::move(r).err();
  return c;
}

namespace {

void append_string(std::string& out, std::string&& s) {
  nlohmann::json value(std::move(s));
  nlohmann::detail::serializer<nlohmann::json> encode(nlohmann::detail::output_adapter<char>(out), ' ',
                                                      nlohmann::json::error_handler_t::replace);
  encode.dump(value, false, false, 0);
}

}  // namespace

std::string exec_answer_text(sandbox::exec_result&& r) {
  const auto flag = [](bool b) { return b ? "true" : "false"; };
  // In the order a JSON object keeps its members (by name), as the answer always was.
  std::string out = "{\"duration_ms\":" + std::to_string(r.duration_ms) + ",\"exit_code\":" + std::to_string(r.exit_code) +
                    ",\"oom_killed\":" + flag(r.oom_killed) + ",\"stderr\":";
  append_string(out, std::move(r.stderr_text));
  if (r.stderr_b64) {
    out += ",\"stderr_b64\":";
    append_string(out, std::move(*r.stderr_b64));
  }
  out += ",\"stdout\":";
  append_string(out, std::move(r.stdout_text));
  if (r.stdout_b64) {
    out += ",\"stdout_b64\":";
    append_string(out, std::move(*r.stdout_b64));
  }
  out += std::string(",\"timed_out\":") + flag(r.timed_out) + ",\"truncated\":" + flag(r.truncated) + "}";
  return out;
}

}  // namespace sandfort::api
