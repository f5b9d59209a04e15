// Validation of create requests and the container spec a sandbox gets (spec.hpp).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "sandfort/core/ids.hpp"
#include "sandfort/sandbox/gvisor_preload.hpp"
#include "sandfort/sandbox/image_policy.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {
namespace {

using nlohmann::json;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 63 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return s.rfind("sbx-", 0) != 0;  // an id-shaped name would make addressing ambiguous
}

bool valid_image_ref(const std::string& s) {
  if (s.empty() || s.size() > 255 || s.front() == '-') return false;
  for (char c : s)
    if (!(is_name_char(c) || c == '/' || c == ':' || c == '@')) return false;
  return true;
}

bool valid_env_key(const std::string& k) {
  if (k.empty() || k.size() > 255 || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  for (char c : k)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

bool valid_label_key(const std::string& k) {
  if (k.empty() || k.size() > 63) return false;
  for (char c : k)
    if (!(is_name_char(c) || c == '/')) return false;
  return true;
}

}  // namespace

bool valid_host_pattern(const std::string& h) {
  if (h == "*") return true;
  std::string rest = h.rfind("*.", 0) == 0 ? h.substr(2) : h;
  if (rest.empty() || rest.size() > 253) return false;
  for (char c : rest)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.')) return false;
  return true;
}

namespace {

error bad(std::string message) { return make_error(errc::invalid_argument, std::move(message)); }

bool is_at_or_under(const std::string& path, std::string_view dir) {
  return path == dir || (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

// A volume's mount path: absolute and normalized (no "." or ".." or empty component, no trailing
// slash), never where the kernel's or the agent's files are, nor above the agent's mounts (a
// volume there would hold their mount points).
result<void> check_mount_path(const std::string& path) {
  const std::string what = "volumes: mount_path '" + path + "' ";
  if (path.empty() || path.front() != '/' || path.size() > 4096) return bad(what + "must be an absolute path");
  if (path == "/") return bad(what + "must not be /");
  if (path.back() == '/' || path.find("//") != std::string::npos || path.find("/./") != std::string::npos ||
      path.find("/../") != std::string::npos || path.ends_with("/.") || path.ends_with("/.."))
    return bad(what + "must be normalized (no '.', '..', empty components or trailing '/')");
  for (char c : path)
    if (static_cast<unsigned char>(c) < 0x20 || c == ':' || c == ',' || c == 0x7f)
      return bad(what + "must not contain control characters, ':' or ','");
  for (std::string_view reserved : {"/proc", "/sys", "/dev", "/run/sandfort", "/.sandfort"})
    if (is_at_or_under(path, reserved)) return bad(what + "is reserved (" + std::string(reserved) + ")");
  if (path == "/run") return bad(what + "would cover /run/sandfort, the agent's socket");
  return {};
}

result<void> check_volume_mounts(const std::vector<volume_request>& volumes) {
  if (volumes.size() > 8) return bad("volumes: at most 8 per sandbox");
  std::set<std::string> names, paths;
  for (const auto& v : volumes) {
    if (v.name.empty()) return bad("volumes: each needs a name");
    if (auto r = check_mount_path(v.mount_path); !r) return r;
    if (!names.insert(v.name).second) return bad("volumes: '" + v.name + "' is mounted twice");
    if (!paths.insert(v.mount_path).second) return bad("volumes: two volumes at '" + v.mount_path + "'");
  }
  // One inside another would be mounted inside the other's data, where the sandbox writes.
  for (const auto& a : paths)
    for (const auto& b : paths)
      if (a != b && is_at_or_under(b, a)) return bad("volumes: '" + b + "' is inside '" + a + "'");
  return {};
}

}  // namespace

std::string new_container_name() { return "sandfort-" + random_hex(8); }

std::string home_root(const config& cfg) { return cfg.state_dir + "/home"; }

bool runs_on_gvisor(const store::sandbox_record& rec) { return spec_from_json(rec.spec_json).runtime == "gvisor"; }

// Every call to an agent needs its address, and parsing the whole spec for one flag was a few
// percent of an exec's CPU. The flag is fixed when the sandbox is created, so it is remembered
// per sandbox and container: a new container (a restart, a restore) is looked at again. Bounded:
// forgotten all at once when full (a re-parse is all it costs).
agent_address agent_address_of(const store::sandbox_record& rec) {
  static std::mutex guard;
  static std::map<std::pair<std::string, std::string>, bool> dials_home;
  auto key = std::make_pair(rec.id, rec.container_id);
  {
    std::lock_guard lock(guard);
    if (auto it = dials_home.find(key); it != dials_home.end()) return {rec.id, rec.container_id, it->second};
  }
  const bool dials = spec_from_json(rec.spec_json).dials_home;
  std::lock_guard lock(guard);
  if (dials_home.size() >= 4096) dials_home.clear();
  dials_home.emplace(std::move(key), dials);
  return {rec.id, rec.container_id, dials};
}

namespace {

bool valid_secret_ref(const std::string& n) {
  if (n.empty() || n.size() > 63 || !(n[0] >= 'a' && n[0] <= 'z')) return false;
  return std::all_of(n.begin(), n.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; });
}

// The variables the daemon sets itself: a secret's placeholder may not take one of their names.
bool daemon_variable(const std::string& k) {
  static const std::set<std::string> names = {"HTTP_PROXY",    "HTTPS_PROXY",         "http_proxy",
                                              "https_proxy",   "NO_PROXY",            "no_proxy",
                                              "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
                                              "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"};
  return names.count(k) > 0;
}

// secrets: each named once, each with a variable of its own that nothing else sets; a placeholder
// made for each. Whether each exists in the organization is the service's to check (the store).
result<void> attach_secrets(const create_request& req, sandbox_spec& spec) {
  if (req.secrets.size() > max_attached_secrets)
    return make_error(errc::invalid_argument, "secrets: at most " + std::to_string(max_attached_secrets) + " per sandbox");
  std::set<std::string> names, envs;
  for (const auto& a : req.secrets) {
    if (!valid_secret_ref(a.name))
      return make_error(errc::invalid_argument, "secrets: '" + a.name + "' is not a secret name");
    std::string env = a.env.empty() ? default_secret_env(a.name) : a.env;
    if (!valid_env_key(env))
      return make_error(errc::invalid_argument, "secrets: env '" + env + "' of " + a.name + " is not a valid variable name");
    if (!names.insert(a.name).second)
      return make_error(errc::invalid_argument, "secrets: " + a.name + " is attached twice");
    if (!envs.insert(env).second || req.env.count(env) || daemon_variable(env))
      return make_error(errc::invalid_argument, "secrets: the variable " + env + " of " + a.name +
                                                    " is set otherwise (env, another secret, or the daemon's own)");
    spec.secrets.push_back({a.name, env, "sfph_" + random_hex(16)});
  }
  bool restricting_rules = std::any_of(spec.egress_rules.begin(), spec.egress_rules.end(),
                                       [](const auto& r) { return !r.methods.empty() || !r.paths.empty(); });
  spec.trusts_interception_ca = !spec.secrets.empty() || restricting_rules;
  return {};
}

}  // namespace

std::string default_secret_env(const std::string& name) {
  std::string out;
  for (char c : name) out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return out;
}

result<sandbox_spec> validate_create(const config& cfg, const create_request& req) {
  sandbox_spec spec;
  if (!req.name.empty() && !valid_name(req.name))
    return bad("name must be 1-63 characters of letters, digits, '-', '_', '.', start with a letter or digit, "
               "and not start with 'sbx-'");
  if (!req.snapshot.empty() && !valid_image_ref(req.snapshot))
    return bad("snapshot '" + req.snapshot + "' is not a valid image reference");
  // The registry must be allowed before Docker is asked anything (image_policy.hpp says why).
  if (auto allowed = req.snapshot.empty() ? result<void>{} : image_policy::from_config(cfg).check(req.snapshot);
      !allowed)
    return std::move(allowed).err();
  if (req.env.size() > 256) return bad("env has more than 256 variables");
  for (const auto& [k, v] : req.env) {
    if (!valid_env_key(k)) return bad("env name '" + k + "' is not a valid variable name");
    if (v.find('\0') != std::string::npos) return bad("env value of " + k + " contains a NUL byte");
  }
  if (req.labels.size() > 64) return bad("labels has more than 64 entries");
  for (const auto& [k, v] : req.labels) {
    if (!valid_label_key(k)) return bad("label key '" + k + "' must be 1-63 characters of [A-Za-z0-9_.-/]");
    if (v.size() > 255) return bad("label value of " + k + " is longer than 255 characters");
  }
  spec.runtime = req.runtime.empty() ? cfg.default_runtime : req.runtime;
  if (spec.runtime != "runc" && spec.runtime != "gvisor") return bad("runtime must be runc or gvisor");
  if (spec.runtime == "gvisor" && cfg.gvisor_runtime.empty())
    return make_error(errc::unavailable, "gVisor sandboxes are not offered by this daemon (gvisor_runtime is empty)");
  const auto& max = cfg.max_resources;
  spec.limits.cpus = req.cpus.value_or(cfg.default_resources.cpus);
  spec.limits.memory_mb = req.memory_mb.value_or(cfg.default_resources.memory_mb);
  // runsc's own threads count against a gVisor sandbox's pids limit, about 22 per process alive
  // at once (docs/gvisor.md): the runc default would end one running some 20 processes. One that
  // names no pids gets the configured maximum instead.
  spec.limits.pids = req.pids.value_or(spec.runtime == "gvisor" ? max.pids : cfg.default_resources.pids);
  if (!(spec.limits.cpus > 0) || spec.limits.cpus > max.cpus)
    return bad("resources.cpus must be > 0 and <= " + json(max.cpus).dump() + " (the configured maximum)");
  if (spec.limits.memory_mb < 64 || spec.limits.memory_mb > max.memory_mb)
    return bad("resources.memory_mb must be between 64 and " + std::to_string(max.memory_mb) +
               " (the configured maximum)");
  if (spec.limits.pids < 16 || spec.limits.pids > max.pids)
    return bad("resources.pids must be between 16 and " + std::to_string(max.pids) + " (the configured maximum)");
  spec.limits.disk_mb = req.disk_mb.value_or(cfg.disk.default_mb);
  if (spec.limits.disk_mb < 16 || spec.limits.disk_mb > cfg.disk.max_mb)
    return bad("resources.disk_mb must be between 16 and " + std::to_string(cfg.disk.max_mb) +
               " (the configured maximum)");
  if (auto r = proxy::validate_rule_set({req.egress_allowlist, req.egress_deny, req.egress_rules}); !r)
    return std::move(r).err();
  if (req.ttl_s && (*req.ttl_s <= 0 || *req.ttl_s > 30LL * 24 * 3600))
    return bad("ttl_s must be between 1 and 2592000 (30 days)");
  if (auto r = check_idle_timeout(req.idle_timeout_s); !r) return std::move(r).err();
  if (req.user.size() > 64 || req.user.find_first_of(" \t\n\"'") != std::string::npos)
    return bad("user must be a user name or uid[:gid] of at most 64 characters");
  if (!req.workdir.empty() && (req.workdir.front() != '/' || req.workdir.size() > 4096))
    return bad("workdir must be an absolute path");
  if (auto r = check_volume_mounts(req.volumes); !r) return std::move(r).err();
  spec.env = req.env;
  spec.volumes = req.volumes;
  spec.labels = req.labels;
  spec.egress_allowlist = req.egress_allowlist;
  spec.egress_deny = req.egress_deny;
  spec.egress_rules = req.egress_rules;
  spec.ttl_s = req.ttl_s;
  spec.idle_timeout_s = req.idle_timeout_s.value_or(cfg.guardrails.default_idle_timeout_s);
  spec.user = req.user;
  spec.workdir = req.workdir;
  spec.public_preview = req.public_preview;
  spec.dials_home = spec.runtime == "gvisor" || cfg.runc_dials_home;
  if (auto r = attach_secrets(req, spec); !r) return std::move(r).err();
  return spec;
}

result<void> validate_allowlist(const std::vector<std::string>& allowlist) {
  if (allowlist.size() > 256) return bad("egress_allowlist has more than 256 entries");
  for (const auto& h : allowlist)
    if (!valid_host_pattern(h)) return bad("egress_allowlist entry '" + h + "' must be a host name, '*.suffix' or '*'");
  return {};
}

nlohmann::json egress_rules_to_json(const std::vector<proxy::egress_rule>& rules) {
  auto out = nlohmann::json::array();
  for (const auto& r : rules) {
    nlohmann::json j = {{"host", r.host}};
    if (!r.methods.empty()) j["methods"] = r.methods;
    if (!r.paths.empty()) j["paths"] = r.paths;
    out.push_back(std::move(j));
  }
  return out;
}

result<std::vector<proxy::egress_rule>> egress_rules_from_json(const nlohmann::json& list) {
  auto invalid = [](std::string m) { return make_error(errc::invalid_argument, std::move(m)); };
  if (!list.is_array()) return invalid("egress_rules must be an array of {host, methods?, paths?}");
  if (list.size() > proxy::max_rules)
    return invalid("egress_rules has more than " + std::to_string(proxy::max_rules) + " rules");
  std::vector<proxy::egress_rule> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& item = list[i];
    auto at = "egress_rules[" + std::to_string(i) + "]";
    if (!item.is_object()) return invalid(at + " must be an object {host, methods?, paths?}");
    proxy::egress_rule r;
    for (const auto& [key, value] : item.items()) {
      if (key == "host") {
        if (!value.is_string()) return invalid(at + ".host must be a string");
        r.host = value.get<std::string>();
      } else if (key == "methods" || key == "paths") {
        auto& into = key == "methods" ? r.methods : r.paths;
        if (!value.is_array()) return invalid(at + "." + key + " must be an array of strings");
        for (const auto& v : value) {
          if (!v.is_string()) return invalid(at + "." + key + " must be an array of strings");
          into.push_back(v.get<std::string>());
        }
      } else {
        return invalid(at + ": unknown field '" + key + "' (host, methods, paths)");
      }
    }
    if (r.host.empty()) return invalid(at + " needs a host");
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> proxy_environment(const std::string& sandbox_id, const std::string& secret,
                                           const std::string& gateway, int port) {
  std::string url = "http://" + sandbox_id + ":" + secret + "@" + gateway + ":" + std::to_string(port);
  // Both spellings: curl and Python read the lower-case ones, Go and others the upper-case.
  return {"HTTP_PROXY=" + url, "HTTPS_PROXY=" + url, "http_proxy=" + url, "https_proxy=" + url,
          "NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1"};
}

void add_secret_environment(const sandbox_spec& spec, std::map<std::string, std::string>& env) {
  for (const auto& a : spec.secrets) env[a.env] = a.placeholder;
  if (!spec.trusts_interception_ca) return;
  // OpenSSL (Python, curl's SSL_CERT_FILE), requests and pip, curl, git: the image's bundle plus
  // the CA. Node: the CA added to its own bundle.
  for (const char* key : {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"})
    env[key] = interception_bundle_path;
  env["NODE_EXTRA_CA_CERTS"] = interception_ca_path;
}

std::map<std::string, std::string> sandbox_environment(const std::string& sandbox_id, const sandbox_spec& spec,
                                                       const std::string& proxy_secret, const std::string& gateway,
                                                       int proxy_port) {
  auto env = spec.env;
  add_secret_environment(spec, env);
  // Last: a caller cannot point a sandbox at another proxy (it would have no route to it anyway).
  for (const auto& kv : proxy_environment(sandbox_id, proxy_secret, gateway, proxy_port)) {
    auto eq = kv.find('=');
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

namespace {

// A sandbox that dials home (every gVisor one): no network interface at all, the agent dialing
// its door (mounted read-only) instead of listening, and the proxy on the agent's
// 127.0.0.1:3128, without a credential (the link it travels proves the sandbox).
void dial_home(docker::container_spec& c, const container_site& site, const store::sandbox_record& rec,
               const sandbox_spec& spec) {
  c.network_mode = "none";
  for (std::size_t i = 0; i + 1 < c.entrypoint.size(); ++i)
    if (c.entrypoint[i] == "--socket") {
      c.entrypoint[i] = "--home";
      c.entrypoint[i + 1] = std::string(home_in_container) + "/home.sock";
    }
  c.tmpfs.clear();  // no socket of the agent's own
  c.binds.push_back({site.home_root + "/" + rec.id, home_in_container, true});
  c.env.clear();
  auto env = spec.env;
  add_secret_environment(spec, env);
  const std::string proxy = "http://127.0.0.1:3128";
  for (const char* key : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) env[key] = proxy;
  env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1";
  for (const auto& [k, v] : env) c.env.push_back(k + "=" + v);
}

// Every process of the sandbox loads the shim first (a caller's own LD_PRELOAD after it): the
// dynamic linker reads LD_PRELOAD from the environment the agent passes on to every child.
void preload_statx_shim(docker::container_spec& c, const container_site& site) {
  c.binds.push_back({site.gvisor_preload, gvisor_preload_in_container, true});
  std::string preload = gvisor_preload_in_container;
  for (auto& entry : c.env)
    if (entry.starts_with("LD_PRELOAD=")) {
      preload += ":" + entry.substr(std::strlen("LD_PRELOAD="));
      entry.clear();
    }
  std::erase(c.env, std::string{});
  c.env.push_back("LD_PRELOAD=" + preload);
}

}  // namespace

docker::container_spec container_for(const config& cfg, const container_site& site, const store::sandbox_record& rec,
                                     const sandbox_spec& spec, const std::string& proxy_secret,
                                     const docker::image_details& image) {
  docker::container_spec c;
  c.name = new_container_name();
  c.image = image.id;  // never a name: the engine would resolve it again, its own way
  // The server-side maxima go to the agent too, which applies them itself (sandfortd enforces them as well).
  c.entrypoint = {"/.sandfort/agent", "--socket", "/run/sandfort/agent.sock",
                  "--max-timeout-s", std::to_string(cfg.exec_max_timeout_s),
                  "--default-timeout-s", std::to_string(cfg.exec_default_timeout_s),
                  "--output-cap", std::to_string(cfg.output_cap_bytes),
                  "--log-cap", std::to_string(cfg.guardrails.command_log_cap_bytes),
                  "--workdir", effective_workdir(spec)};
  for (const auto& [k, v] : sandbox_environment(rec.id, spec, proxy_secret, site.gateway, cfg.egress.proxy_port))
    c.env.push_back(k + "=" + v);
  c.labels = {{label_sandbox, rec.id}, {label_org, rec.org_id}, {label_instance, site.instance_id}};
  for (const auto& [key, value] : image.labels) c.labels.emplace(key, "");
  // Docker's embedded DNS answers a container's hostname to its neighbours too: one name for
  // all, so none reveals a sandbox id (the sandbox knows its own from its proxy settings).
  c.hostname = "sandbox";
  c.user = spec.user;
  // An explicit workdir is also Docker's (made by the engine when missing, whatever the user);
  // the agent enters it, or /work, which it makes itself (--workdir).
  c.workdir = spec.workdir;
  c.binds = {{cfg.agent_path, "/.sandfort/agent", true}};
  // The agent's socket lives in a tmpfs of this container's own: nothing the sandbox writes
  // there is on the host (no disk to fill, no set-uid file for a host user), and sandfortd
  // reaches it only through the container's root (agent_socket.hpp). 1777: the agent may run
  // as the sandbox's unprivileged user.
  c.tmpfs = {{"/run/sandfort", 1 << 20, 256, 01777}};
  c.cpus = spec.limits.cpus;
  c.memory_bytes = spec.limits.memory_mb * 1024 * 1024;
  c.pids_limit = spec.limits.pids;
  // Hard enforcement where the engine's storage can (src/sandbox/disk_guard.cpp decides); the
  // measuring loop watches every sandbox either way (volumes have no size of their own).
  if (site.hard_disk) c.storage_size_mb = disk_limit_mb(spec.limits, cfg.disk);
  // What package managers need as root; NET_RAW, MKNOD, SYS_CHROOT, SETFCAP, AUDIT_WRITE and
  // the rest of Docker's defaults are dropped.
  c.cap_add = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "NET_BIND_SERVICE"};
  c.init = true;
  // The internal sandbox network: its only way out is the egress proxy on the gateway.
  c.network_mode = site.network;
  // Nothing resolves inside (the proxy resolves names), and Docker's embedded resolver does not
  // answer a name it cannot forward: with glibc's defaults (5 s, 2 attempts, A and AAAA) every
  // lookup hung 20 s before it failed. One attempt of 1 s per query: it fails within about 2 s.
  // (A sandbox that dials home has no interface: its lookups fail at once either way.)
  c.dns_options = {"timeout:1", "attempts:1"};
  c.runtime = spec.runtime == "gvisor" ? cfg.gvisor_runtime : cfg.runtime;
  c.stop_timeout_s = cfg.stop_timeout_s;
  if (spec.dials_home) dial_home(c, site, rec, spec);
  if (spec.runtime == "gvisor" && !site.gvisor_preload.empty()) preload_statx_shim(c, site);
  return c;
}

std::string spec_to_json(const sandbox_spec& spec) {
  json j = {{"env", spec.env},
            {"labels", spec.labels},
            {"resources",
             {{"cpus", spec.limits.cpus}, {"memory_mb", spec.limits.memory_mb}, {"pids", spec.limits.pids},
              {"disk_mb", spec.limits.disk_mb}}},
            {"egress_allowlist", spec.egress_allowlist},
            {"egress_deny", spec.egress_deny},
            {"egress_rules", egress_rules_to_json(spec.egress_rules)},
            {"user", spec.user},
            {"workdir", spec.workdir},
            {"public_preview", spec.public_preview},
            {"runtime", spec.runtime},
            {"dials_home", spec.dials_home}};
  if (!spec.volumes.empty()) {
    json volumes = json::array();
    for (const auto& v : spec.volumes)
      volumes.push_back({{"name", v.name}, {"mount_path", v.mount_path}, {"read_only", v.read_only}});
    j["volumes"] = std::move(volumes);
  }
  if (spec.ttl_s) j["ttl_s"] = *spec.ttl_s;
  if (spec.idle_timeout_s) j["idle_timeout_s"] = spec.idle_timeout_s;
  if (!spec.snapshot_name.empty()) j["snapshot_name"] = spec.snapshot_name;
  if (spec.pooled) j["pooled"] = true;
  if (!spec.secrets.empty()) {
    json attached = json::array();
    for (const auto& a : spec.secrets)
      attached.push_back({{"name", a.name}, {"env", a.env}, {"placeholder", a.placeholder}});
    j["secrets"] = std::move(attached);
  }
  if (spec.trusts_interception_ca) j["trusts_interception_ca"] = true;
  return j.dump();
}

result<void> check_idle_timeout(const std::optional<std::int64_t>& idle_timeout_s) {
  if (idle_timeout_s && (*idle_timeout_s < 0 || *idle_timeout_s > 30LL * 24 * 3600))
    return make_error(errc::invalid_argument, "idle_timeout_s must be between 0 (never) and 2592000 (30 days)");
  return {};
}

sandbox_spec spec_from_json(const std::string& text) {
  sandbox_spec spec;
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return spec;
  spec.env = j.value("env", std::map<std::string, std::string>{});
  spec.labels = j.value("labels", std::map<std::string, std::string>{});
  if (j.contains("resources")) {
    const auto& r = j["resources"];
    spec.limits = {r.value("cpus", 0.0), r.value("memory_mb", std::int64_t{0}), r.value("pids", std::int64_t{0}),
                   r.value("disk_mb", std::int64_t{0})};
  }
  spec.egress_allowlist = j.value("egress_allowlist", std::vector<std::string>{});
  spec.egress_deny = j.value("egress_deny", std::vector<std::string>{});
  if (j.contains("egress_rules"))
    if (auto rules = egress_rules_from_json(j["egress_rules"])) spec.egress_rules = std::move(*rules);
  if (j.contains("ttl_s")) spec.ttl_s = j["ttl_s"].get<std::int64_t>();
  spec.idle_timeout_s = j.value("idle_timeout_s", std::int64_t{0});
  spec.snapshot_name = j.value("snapshot_name", std::string{});
  spec.pooled = j.value("pooled", false);
  spec.user = j.value("user", "");
  spec.workdir = j.value("workdir", "");
  spec.public_preview = j.value("public_preview", false);
  spec.runtime = j.value("runtime", "runc");
  spec.dials_home = j.value("dials_home", spec.runtime == "gvisor");  // rows made before the flag
  if (auto a = j.find("secrets"); a != j.end() && a->is_array())
    for (const auto& m : *a)
      if (m.is_object())
        spec.secrets.push_back({m.value("name", ""), m.value("env", ""), m.value("placeholder", "")});
  spec.trusts_interception_ca = j.value("trusts_interception_ca", false);
  if (auto v = j.find("volumes"); v != j.end() && v->is_array())
    for (const auto& m : *v)
      if (m.is_object())
        spec.volumes.push_back({m.value("name", ""), m.value("mount_path", ""), m.value("read_only", false)});
  return spec;
}

}  // namespace sandfort::sandbox

namespace sandfort::sandbox {

sandbox_view to_view(const store::sandbox_record& rec) {
  sandbox_view v;
  v.id = rec.id;
  v.name = rec.name;
  v.state = rec.state;
  v.snapshot = rec.snapshot;
  v.created_at = rec.created_at;
  v.updated_at = rec.updated_at;
  v.expires_at = rec.expires_at;
  v.error_message = rec.error_message;
  v.spec = spec_from_json(rec.spec_json);
  if (!v.spec.snapshot_name.empty()) v.snapshot = v.spec.snapshot_name;  // not the image's random name
  return v;
}

}  // namespace sandfort::sandbox
