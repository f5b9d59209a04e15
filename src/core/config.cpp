#include "sandfort/core/config.hpp"
#include "sandfort/core/runtimes.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <nlohmann/json.hpp>

namespace sandfort {
namespace {

using nlohmann::json;

json rate_limits_tree(const rate_limits_config& r) {
  auto one = [](const rate_limit& l) { return json{{"rate_per_s", l.rate_per_s}, {"burst", l.burst}}; };
  return json{{"viewer", one(r.viewer)}, {"member", one(r.member)}, {"admin", one(r.admin)},
              {"superadmin", one(r.superadmin)}, {"org", one(r.org)}};
}

rate_limits_config rate_limits_from(const json& j) {
  auto one = [&](const char* role) {
    return rate_limit{j.at(role).at("rate_per_s").get<double>(), j.at(role).at("burst").get<std::int64_t>()};
  };
  return {one("viewer"), one("member"), one("admin"), one("superadmin"), one("org")};
}

json to_json_tree(const config& c) {
  auto limits = [](const resource_limits& l) {
    return json{{"cpus", l.cpus}, {"memory_mb", l.memory_mb}, {"pids", l.pids}};
  };
  return json{{"listen", c.listen},
              {"state_dir", c.state_dir},
              {"database", c.database},
              {"docker_socket", c.docker_socket},
              {"agent_path", c.agent_path},
              {"default_image", c.default_image},
              {"runtime", c.runtime},
              {"gvisor_runtime", c.gvisor_runtime},
              {"default_runtime", c.default_runtime},
              {"runc_dials_home", c.runc_dials_home},
              {"log_format", c.log_format},
              {"log_level", c.log_level},
              {"max_body_bytes", c.max_body_bytes},
              {"header_timeout_s", c.header_timeout_s},
              {"idle_timeout_s", c.idle_timeout_s},
              {"shutdown_grace_s", c.shutdown_grace_s},
              {"max_connections", c.max_connections},
              {"max_idle_connections_per_source", c.max_idle_connections_per_source},
              {"max_idle_connections", c.max_idle_connections},
              {"agent_start_timeout_s", c.agent_start_timeout_s},
              {"stop_timeout_s", c.stop_timeout_s},
              {"docker_timeout_s", c.docker_timeout_s},
              {"pull_timeout_s", c.pull_timeout_s},
              {"exec_default_timeout_s", c.exec_default_timeout_s},
              {"exec_max_timeout_s", c.exec_max_timeout_s},
              {"output_cap_bytes", c.output_cap_bytes},
              {"agent_idle_timeout_s", c.agent_idle_timeout_s},
              {"agent_response_budget_mb", c.agent_response_budget_mb},
              {"agent_keepalive_s", c.agent_keepalive_s},
              {"default_resources", limits(c.default_resources)},
              {"max_resources", limits(c.max_resources)},
              {"network",
               {{"name", c.network.name},
                {"subnet", c.network.subnet},
                {"bridge", c.network.bridge},
                {"host_firewall", c.network.host_firewall}}},
              {"egress",
               {{"proxy_port", c.egress.proxy_port},
                {"allowed_ranges", c.egress.allowed_ranges},
                {"connect_timeout_s", c.egress.connect_timeout_s},
                {"idle_timeout_s", c.egress.idle_timeout_s},
                {"max_tunnels_per_sandbox", c.egress.max_tunnels_per_sandbox},
                {"max_pending_per_source", c.egress.max_pending_per_source},
                {"max_pending", c.egress.max_pending},
                {"max_tunnels", c.egress.max_tunnels},
                {"upstream_proxy", c.egress.upstream_proxy},
                {"upstream_proxy_username", c.egress.upstream_proxy_username},
                {"upstream_proxy_password_file", c.egress.upstream_proxy_password_file}}},
              {"tls", {{"cert_file", c.tls.cert_file}, {"key_file", c.tls.key_file}}},
              {"trusted_proxies", c.trusted_proxies},
              {"preview",
               {{"listen", c.preview.listen}, {"domain", c.preview.domain}, {"url_template", c.preview.url_template},
                {"max_connections", c.preview.max_connections},
                {"max_idle_connections_per_source", c.preview.max_idle_connections_per_source},
                {"max_idle_connections", c.preview.max_idle_connections}}},
              {"images", {{"allowed_registries", c.images.allowed_registries}}},
              {"e2b", {{"enabled", c.e2b.enabled}}},
              {"oidc",
               {{"issuers", json::array()},  // read by read_issuers(): a list of objects
                {"leeway_s", c.oidc.leeway_s},
                {"max_token_bytes", c.oidc.max_token_bytes},
                {"jwks_min_refresh_s", c.oidc.jwks_min_refresh_s},
                {"jwks_default_cache_s", c.oidc.jwks_default_cache_s},
                {"jwks_max_cache_s", c.oidc.jwks_max_cache_s},
                {"fetch_timeout_s", c.oidc.fetch_timeout_s}}},
              {"console", {{"public_url", c.console.public_url}}},
              {"audit",
               {{"key_path", c.audit.key_path},
                {"checkpoint_interval_s", c.audit.checkpoint_interval_s},
                {"export_path", c.audit.export_path},
                {"summary_interval_s", c.audit.summary_interval_s}}},
              {"secrets",
               {{"key_file", c.secrets.key_file},
                {"max_per_org", c.secrets.max_per_org},
                {"max_value_bytes", c.secrets.max_value_bytes},
                {"upstream_ca_file", c.secrets.upstream_ca_file}}},
              {"webhooks",
               {{"max_per_org", c.webhooks.max_per_org},
                {"allowed_ranges", c.webhooks.allowed_ranges},
                {"concurrency", c.webhooks.concurrency},
                {"timeout_s", c.webhooks.timeout_s},
                {"retry_base_ms", c.webhooks.retry_base_ms},
                {"retry_max_ms", c.webhooks.retry_max_ms},
                {"max_age_s", c.webhooks.max_age_s},
                {"poll_interval_ms", c.webhooks.poll_interval_ms},
                {"log_retention_s", c.webhooks.log_retention_s}}},
              {"guardrails",
               {{"max_sandboxes", c.guardrails.max_sandboxes},
                {"max_cpus", c.guardrails.max_cpus},
                {"max_memory_mb", c.guardrails.max_memory_mb},
                {"max_disk_mb", c.guardrails.max_disk_mb},
                {"allowed_images", c.guardrails.allowed_images},
                {"allowed_runtimes", c.guardrails.allowed_runtimes},
                {"max_volumes", c.guardrails.max_volumes},
                {"max_snapshots", c.guardrails.max_snapshots},
                {"default_idle_timeout_s", c.guardrails.default_idle_timeout_s},
                {"delete_grace_s", c.guardrails.delete_grace_s},
                {"rate_limits", rate_limits_tree(c.guardrails.rate_limits)},
                {"command_log_cap_bytes", c.guardrails.command_log_cap_bytes},
                {"max_api_keys", c.guardrails.max_api_keys}}},
              {"disk",
               {{"enforcement", c.disk.enforcement},
                {"default_mb", c.disk.default_mb},
                {"max_mb", c.disk.max_mb},
                {"check_interval_s", c.disk.check_interval_s},
                {"max_walk_entries", c.disk.max_walk_entries},
                {"max_walk_depth", c.disk.max_walk_depth}}},
              {"host",
               {{"memory_reserve_mb", c.host.memory_reserve_mb}, {"memory_overcommit", c.host.memory_overcommit}}},
              {"store",
               {{"deleted_retention_s", c.store.deleted_retention_s},
                {"maintenance_interval_s", c.store.maintenance_interval_s},
                {"min_free_mb", c.store.min_free_mb},
                {"reserve_mb", c.store.reserve_mb}}},
              {"pool",
               {{"max_parallel", c.pool.max_parallel},
                {"burst_window_s", c.pool.burst_window_s},
                {"idle_shrink_s", c.pool.idle_shrink_s}}},
              {"pools", json::array()}};  // read by read_pools(): a list of objects
}

constexpr const char* issuers_key = "oidc.issuers";
constexpr const char* pools_key = "pools";
// Lists of objects: set in the file only, and read (with their own checks) by read_issuers()
// and read_pools().
bool is_object_list(const std::string& key) { return key == issuers_key || key == pools_key; }

// One entry of oidc.issuers; unknown fields are errors like unknown keys anywhere else.
result<oidc_issuer_config> read_issuer(const json& j, std::size_t index) {
  const std::string where = std::string(issuers_key) + "[" + std::to_string(index) + "]";
  if (!j.is_object()) return make_error(errc::invalid_argument, "config: " + where + " must be an object");
  oidc_issuer_config c;
  auto text = [&](const char* key, std::string& out) -> result<void> {
    if (!j.contains(key)) return {};
    if (!j[key].is_string()) return make_error(errc::invalid_argument, "config: " + where + "." + key + " must be a string");
    out = j[key].get<std::string>();
    return {};
  };
  auto texts = [&](const char* key, std::vector<std::string>& out) -> result<void> {
    if (!j.contains(key)) return {};
    const json& v = j[key];
    if (v.is_string()) {
      out = {v.get<std::string>()};
      return {};
    }
    if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); }))
      return make_error(errc::invalid_argument, "config: " + where + "." + key + " must be a string or a list of strings");
    out = v.get<std::vector<std::string>>();
    return {};
  };
  static const char* known[] = {"issuer",         "audience",          "jwks_uri",
                                "algorithms",     "org_claim",         "org",
                                "role_claim",     "role_map",          "default_role",
                                "name_claim",     "ca_file",           "console_client_id",
                                "console_client_secret_file", "console_client_auth", "console_name",
                                "console_scopes"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return it.key() == k; }) == std::end(known))
      return make_error(errc::invalid_argument, "config: unknown key " + where + "." + it.key());
  for (auto r : {text("issuer", c.issuer), texts("audience", c.audiences), text("jwks_uri", c.jwks_uri),
                 texts("algorithms", c.algorithms), text("org_claim", c.org_claim), text("org", c.org),
                 text("role_claim", c.role_claim), text("default_role", c.default_role),
                 text("name_claim", c.name_claim), text("ca_file", c.ca_file),
                 text("console_client_id", c.console_client_id),
                 text("console_client_secret_file", c.console_client_secret_file),
                 text("console_client_auth", c.console_client_auth), text("console_name", c.console_name),
                 texts("console_scopes", c.console_scopes)})
    if (!r) return std::move(r).err();
  if (j.contains("role_map")) {
    const json& m = j["role_map"];
    if (!m.is_object()) return make_error(errc::invalid_argument, "config: " + where + ".role_map must be an object");
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (!it.value().is_string())
        return make_error(errc::invalid_argument, "config: " + where + ".role_map values must be role names");
      c.role_map[it.key()] = it.value().get<std::string>();
    }
  }
  return c;
}

// One entry of pools: {"image", "resources": {"cpus", "memory_mb", "pids"}, "min_size" (or "size"),
// "max_size"}. "size" is the name from before pools learned: it is min_size, and without a
// max_size the pool keeps that size as it always did.
result<pool_config> read_pool(const json& j, std::size_t index) {
  const std::string where = "config: pools[" + std::to_string(index) + "]";
  auto bad = [&](const std::string& what) { return make_error(errc::invalid_argument, where + what); };
  if (!j.is_object()) return bad(" must be an object");
  pool_config p;
  static const char* known[] = {"image", "resources", "size", "min_size", "max_size"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return it.key() == k; }) == std::end(known))
      return bad(": unknown key " + it.key());
  if (j.contains("image")) {
    if (!j["image"].is_string()) return bad(".image must be a string");
    p.image = j["image"].get<std::string>();
  }
  if (j.contains("size") == j.contains("min_size")) return bad(" needs one of size and min_size (the same thing)");
  const char* min_key = j.contains("size") ? "size" : "min_size";
  if (!j[min_key].is_number_integer()) return bad(std::string(".") + min_key + " must be a whole number");
  p.min_size = j[min_key].get<int>();
  if (j.contains("max_size")) {
    if (!j["max_size"].is_number_integer()) return bad(".max_size must be a whole number");
    p.max_size = j["max_size"].get<int>();
  }
  if (j.contains("resources")) {
    const json& r = j["resources"];
    if (!r.is_object() || !r.contains("cpus") || !r.contains("memory_mb") || !r.contains("pids") || r.size() != 3 ||
        !r["cpus"].is_number() || !r["memory_mb"].is_number_integer() || !r["pids"].is_number_integer())
      return bad(".resources must be {\"cpus\": N, \"memory_mb\": N, \"pids\": N}");
    p.resources = resource_limits{r["cpus"].get<double>(), r["memory_mb"].get<std::int64_t>(), r["pids"].get<std::int64_t>()};
  }
  return p;
}

result<std::vector<pool_config>> read_pools(const json& list) {
  std::vector<pool_config> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto one = read_pool(list[i], i);
    if (!one) return std::move(one).err();
    out.push_back(std::move(*one));
  }
  return out;
}

result<std::vector<oidc_issuer_config>> read_issuers(const json& list) {
  std::vector<oidc_issuer_config> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto one = read_issuer(list[i], i);
    if (!one) return std::move(one).err();
    out.push_back(std::move(*one));
  }
  return out;
}

config from_json_tree(const json& j) {
  auto limits = [](const json& l) {
    return resource_limits{l.at("cpus").get<double>(), l.at("memory_mb").get<std::int64_t>(),
                           l.at("pids").get<std::int64_t>()};
  };
  config c;
  c.listen = j.at("listen").get<std::string>();
  c.state_dir = j.at("state_dir").get<std::string>();
  c.database = j.at("database").get<std::string>();
  c.docker_socket = j.at("docker_socket").get<std::string>();
  c.agent_path = j.at("agent_path").get<std::string>();
  c.default_image = j.at("default_image").get<std::string>();
  c.runtime = j.at("runtime").get<std::string>();
  c.gvisor_runtime = j.at("gvisor_runtime").get<std::string>();
  c.default_runtime = j.at("default_runtime").get<std::string>();
  c.runc_dials_home = j.at("runc_dials_home").get<bool>();
  c.log_format = j.at("log_format").get<std::string>();
  c.log_level = j.at("log_level").get<std::string>();
  c.max_body_bytes = j.at("max_body_bytes").get<std::uint64_t>();
  c.header_timeout_s = j.at("header_timeout_s").get<int>();
  c.idle_timeout_s = j.at("idle_timeout_s").get<int>();
  c.shutdown_grace_s = j.at("shutdown_grace_s").get<int>();
  c.max_connections = j.at("max_connections").get<int>();
  c.max_idle_connections_per_source = j.at("max_idle_connections_per_source").get<int>();
  c.max_idle_connections = j.at("max_idle_connections").get<int>();
  c.agent_start_timeout_s = j.at("agent_start_timeout_s").get<int>();
  c.stop_timeout_s = j.at("stop_timeout_s").get<int>();
  c.docker_timeout_s = j.at("docker_timeout_s").get<int>();
  c.pull_timeout_s = j.at("pull_timeout_s").get<int>();
  c.exec_default_timeout_s = j.at("exec_default_timeout_s").get<int>();
  c.exec_max_timeout_s = j.at("exec_max_timeout_s").get<int>();
  c.output_cap_bytes = j.at("output_cap_bytes").get<std::uint64_t>();
  c.agent_idle_timeout_s = j.at("agent_idle_timeout_s").get<int>();
  c.agent_response_budget_mb = j.at("agent_response_budget_mb").get<std::uint64_t>();
  c.agent_keepalive_s = j.at("agent_keepalive_s").get<int>();
  c.default_resources = limits(j.at("default_resources"));
  c.max_resources = limits(j.at("max_resources"));
  const json& pt = j.at("pool");
  c.pool = {pt.at("max_parallel").get<int>(), pt.at("burst_window_s").get<int>(), pt.at("idle_shrink_s").get<int>()};
  const json& n = j.at("network");
  c.network = {n.at("name").get<std::string>(), n.at("subnet").get<std::string>(), n.at("bridge").get<std::string>(),
               n.at("host_firewall").get<bool>()};
  const json& e = j.at("egress");
  c.egress = {e.at("proxy_port").get<int>(), e.at("allowed_ranges").get<std::string>(),
              e.at("connect_timeout_s").get<int>(), e.at("idle_timeout_s").get<int>(),
              e.at("max_tunnels_per_sandbox").get<int>()};
  c.egress.max_pending_per_source = e.at("max_pending_per_source").get<int>();
  c.egress.max_pending = e.at("max_pending").get<int>();
  c.egress.max_tunnels = e.at("max_tunnels").get<int>();
  c.egress.upstream_proxy = e.at("upstream_proxy").get<std::string>();
  c.egress.upstream_proxy_username = e.at("upstream_proxy_username").get<std::string>();
  c.egress.upstream_proxy_password_file = e.at("upstream_proxy_password_file").get<std::string>();
  c.tls = {j.at("tls").at("cert_file").get<std::string>(), j.at("tls").at("key_file").get<std::string>()};
  c.trusted_proxies = j.at("trusted_proxies").get<std::string>();
  const json& p = j.at("preview");
  c.preview = {p.at("listen").get<std::string>(), p.at("domain").get<std::string>(),
               p.at("url_template").get<std::string>()};
  c.preview.max_connections = p.at("max_connections").get<int>();
  c.preview.max_idle_connections_per_source = p.at("max_idle_connections_per_source").get<int>();
  c.preview.max_idle_connections = p.at("max_idle_connections").get<int>();
  c.images.allowed_registries = j.at("images").at("allowed_registries").get<std::vector<std::string>>();
  c.e2b.enabled = j.at("e2b").at("enabled").get<bool>();
  const json& o = j.at("oidc");
  c.oidc.leeway_s = o.at("leeway_s").get<int>();
  c.oidc.max_token_bytes = o.at("max_token_bytes").get<int>();
  c.oidc.jwks_min_refresh_s = o.at("jwks_min_refresh_s").get<int>();
  c.oidc.jwks_default_cache_s = o.at("jwks_default_cache_s").get<int>();
  c.oidc.jwks_max_cache_s = o.at("jwks_max_cache_s").get<int>();
  c.oidc.fetch_timeout_s = o.at("fetch_timeout_s").get<int>();
  c.console.public_url = j.at("console").at("public_url").get<std::string>();
  const json& a = j.at("audit");
  c.audit.key_path = a.at("key_path").get<std::string>();
  c.audit.checkpoint_interval_s = a.at("checkpoint_interval_s").get<int>();
  c.audit.export_path = a.at("export_path").get<std::string>();
  c.audit.summary_interval_s = a.at("summary_interval_s").get<int>();
  const json& sec = j.at("secrets");
  c.secrets.key_file = sec.at("key_file").get<std::string>();
  c.secrets.max_per_org = sec.at("max_per_org").get<int>();
  c.secrets.max_value_bytes = sec.at("max_value_bytes").get<int>();
  c.secrets.upstream_ca_file = sec.at("upstream_ca_file").get<std::string>();
  const json& wh = j.at("webhooks");
  c.webhooks.max_per_org = wh.at("max_per_org").get<int>();
  c.webhooks.allowed_ranges = wh.at("allowed_ranges").get<std::string>();
  c.webhooks.concurrency = wh.at("concurrency").get<int>();
  c.webhooks.timeout_s = wh.at("timeout_s").get<int>();
  c.webhooks.retry_base_ms = wh.at("retry_base_ms").get<int>();
  c.webhooks.retry_max_ms = wh.at("retry_max_ms").get<int>();
  c.webhooks.max_age_s = wh.at("max_age_s").get<int>();
  c.webhooks.poll_interval_ms = wh.at("poll_interval_ms").get<int>();
  c.webhooks.log_retention_s = wh.at("log_retention_s").get<int>();
  const json& g = j.at("guardrails");
  c.guardrails.max_sandboxes = g.at("max_sandboxes").get<int>();
  c.guardrails.max_cpus = g.at("max_cpus").get<double>();
  c.guardrails.max_memory_mb = g.at("max_memory_mb").get<std::int64_t>();
  c.guardrails.max_disk_mb = g.at("max_disk_mb").get<std::int64_t>();
  c.guardrails.allowed_images = g.at("allowed_images").get<std::vector<std::string>>();
  c.guardrails.allowed_runtimes = g.at("allowed_runtimes").get<std::vector<std::string>>();
  c.guardrails.max_volumes = g.at("max_volumes").get<int>();
  c.guardrails.max_snapshots = g.at("max_snapshots").get<int>();
  c.guardrails.default_idle_timeout_s = g.at("default_idle_timeout_s").get<int>();
  c.guardrails.delete_grace_s = g.at("delete_grace_s").get<int>();
  c.guardrails.rate_limits = rate_limits_from(g.at("rate_limits"));
  c.guardrails.command_log_cap_bytes = g.at("command_log_cap_bytes").get<std::uint64_t>();
  const json& d = j.at("disk");
  c.disk.enforcement = d.at("enforcement").get<std::string>();
  c.disk.default_mb = d.at("default_mb").get<std::int64_t>();
  c.disk.max_mb = d.at("max_mb").get<std::int64_t>();
  c.disk.check_interval_s = d.at("check_interval_s").get<int>();
  c.disk.max_walk_entries = d.at("max_walk_entries").get<std::int64_t>();
  c.disk.max_walk_depth = d.at("max_walk_depth").get<int>();
  c.guardrails.max_api_keys = g.at("max_api_keys").get<int>();
  c.host.memory_reserve_mb = j.at("host").at("memory_reserve_mb").get<std::int64_t>();
  c.host.memory_overcommit = j.at("host").at("memory_overcommit").get<double>();
  const json& st = j.at("store");
  c.store.deleted_retention_s = st.at("deleted_retention_s").get<std::int64_t>();
  c.store.maintenance_interval_s = st.at("maintenance_interval_s").get<int>();
  c.store.min_free_mb = st.at("min_free_mb").get<std::int64_t>();
  c.store.reserve_mb = st.at("reserve_mb").get<std::int64_t>();
  return c;
}

// Parses a textual value into the JSON type of the default it replaces.
result<json> parse_as(const json& like, const std::string& key, const std::string& text) {
  try {
    if (like.is_string()) return json(text);
    if (like.is_array()) {  // a list from the environment or --set: "a, b"
      json list = json::array();
      for (std::size_t start = 0; start <= text.size();) {
        auto comma = std::min(text.find(',', start), text.size());
        auto item = text.substr(start, comma - start);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        if (!item.empty()) list.push_back(item);
        start = comma + 1;
      }
      return list;
    }
    if (like.is_boolean()) {
      if (text == "true" || text == "1") return json(true);
      if (text == "false" || text == "0") return json(false);
    } else if (like.is_number_float()) {
      std::size_t used = 0;
      double v = std::stod(text, &used);
      if (used == text.size()) return json(v);
    } else if (like.is_number()) {
      std::size_t used = 0;
      long long v = std::stoll(text, &used);
      if (used == text.size() && v >= 0) return json(v);
    }
  } catch (const std::exception&) {
  }
  return make_error(errc::invalid_argument, "config: bad value for " + key + ": '" + text + "'");
}

// Overlays src onto dst; every key of src must exist in dst with a compatible type.
result<void> overlay(json& dst, const json& src, const std::string& prefix) {
  if (!src.is_object()) return make_error(errc::invalid_argument, "config: " + prefix + " must be an object");
  for (auto it = src.begin(); it != src.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (!dst.contains(it.key())) return make_error(errc::invalid_argument, "config: unknown key " + key);
    json& slot = dst[it.key()];
    if (is_object_list(key)) {
      if (!it.value().is_array()) return make_error(errc::invalid_argument, "config: " + key + " must be a list");
      slot = it.value();
    } else if (slot.is_object()) {
      if (auto r = overlay(slot, it.value(), key); !r) return r;
    } else if (slot.is_string() != it.value().is_string() || slot.is_number() != it.value().is_number() ||
               slot.is_boolean() != it.value().is_boolean() || slot.is_array() != it.value().is_array() ||
               (slot.is_array() && !std::all_of(it.value().begin(), it.value().end(),
                                                [](const json& e) { return e.is_string(); }))) {
      return make_error(errc::invalid_argument, "config: wrong type for " + key);
    } else {
      slot = it.value();
    }
  }
  return {};
}

// "max_resources.cpus" → "SANDFORT_MAX_RESOURCES_CPUS"
std::string env_name(const std::string& key) {
  std::string out = "SANDFORT_";
  for (char ch : key) out.push_back(ch == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
  return out;
}

result<void> apply_env(json& node, const std::string& prefix, const std::map<std::string, std::string>& env) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (is_object_list(key)) continue;
    if (it.value().is_object()) {
      if (auto r = apply_env(it.value(), key, env); !r) return r;
      continue;
    }
    auto found = env.find(env_name(key));
    if (found == env.end()) continue;
    auto v = parse_as(it.value(), found->first, found->second);
    if (!v) return std::move(v).err();
    it.value() = *v;
  }
  return {};
}

json* find_key(json& root, const std::string& dotted) {
  json* node = &root;
  std::size_t start = 0;
  while (true) {
    auto dot = dotted.find('.', start);
    std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &(*node)[part];
    if (dot == std::string::npos) return node->is_object() ? nullptr : node;
    start = dot + 1;
  }
}

result<void> check_disk(const disk_config& d) {
  const auto bad = [](const std::string& m) { return make_error(errc::invalid_argument, "config: disk." + m); };
  if (d.enforcement != "auto" && d.enforcement != "hard" && d.enforcement != "measured")
    return bad("enforcement must be auto, hard or measured");
  if (d.max_mb < 16 || d.max_mb > (std::int64_t{1} << 30)) return bad("max_mb must be 16 to 1073741824");
  if (d.default_mb < 16 || d.default_mb > d.max_mb) return bad("default_mb must be 16 to max_mb");
  if (d.check_interval_s < 1 || d.check_interval_s > 3600) return bad("check_interval_s must be 1 to 3600");
  if (d.max_walk_entries < 1000 || d.max_walk_entries > 100'000'000)
    return bad("max_walk_entries must be 1000 to 100000000");
  if (d.max_walk_depth < 16 || d.max_walk_depth > 4096) return bad("max_walk_depth must be 16 to 4096");
  return {};
}

// The organizations' default runtime policy (runtimes.hpp).
result<void> check_allowed_runtimes(const config& c) {
  auto checked = check_runtime_list(c.guardrails.allowed_runtimes, c.gvisor_runtime);
  if (!checked) return make_error(errc::invalid_argument, "config: guardrails.allowed_runtimes: " + checked.err().message);
  return {};
}

result<void> check_store(const store_config& s) {
  // Ten years bounds the cutoff's arithmetic and is longer than any retention policy asks for.
  constexpr std::int64_t max_retention_s = 10LL * 365 * 24 * 3600;
  if (s.deleted_retention_s < 0 || s.deleted_retention_s > max_retention_s)
    return make_error(errc::invalid_argument, "config: store.deleted_retention_s must be 0 (keep for ever) to " +
                                                  std::to_string(max_retention_s) + " (10 years)");
  if (s.maintenance_interval_s <= 0 || s.maintenance_interval_s > 24 * 3600)
    return make_error(errc::invalid_argument, "config: store.maintenance_interval_s must be 1 to 86400");
  if (s.min_free_mb < 0 || s.min_free_mb > (1LL << 30))
    return make_error(errc::invalid_argument, "config: store.min_free_mb must be 0 to 1073741824");
  if (s.reserve_mb < 0 || s.reserve_mb > 1024)
    return make_error(errc::invalid_argument, "config: store.reserve_mb must be 0 to 1024");
  return {};
}

// Fills each pool's image and resources from the defaults, then checks it: a pool a create could
// never match, or two pools that would compete for the same creates, are configuration mistakes.
result<void> finalize_pools(config& c) {
  const auto& t = c.pool;
  if (t.max_parallel < 1 || t.max_parallel > 16)
    return make_error(errc::invalid_argument, "config: pool.max_parallel must be 1 to 16");
  if (t.burst_window_s < 1 || t.burst_window_s > 3600)
    return make_error(errc::invalid_argument, "config: pool.burst_window_s must be 1 to 3600");
  if (t.idle_shrink_s < 1 || t.idle_shrink_s > 7 * 24 * 3600)
    return make_error(errc::invalid_argument, "config: pool.idle_shrink_s must be 1 to 604800");
  for (std::size_t i = 0; i < c.pools.size(); ++i) {
    auto& p = c.pools[i];
    const std::string where = "config: pools[" + std::to_string(i) + "]";
    if (p.image.empty()) p.image = c.default_image;
    if (!p.resources) p.resources = c.default_resources;
    const auto& r = *p.resources;
    if (p.max_size == -1) p.max_size = p.min_size;
    if (p.min_size < 0 || p.min_size > 64)
      return make_error(errc::invalid_argument, where + ".min_size (or size) must be 0 to 64");
    if (p.max_size < p.min_size || p.max_size > 64)
      return make_error(errc::invalid_argument, where + ".max_size must be min_size to 64");
    if (!(r.cpus > 0) || r.cpus > c.max_resources.cpus || r.memory_mb < 64 || r.memory_mb > c.max_resources.memory_mb ||
        r.pids < 16 || r.pids > c.max_resources.pids)
      return make_error(errc::invalid_argument, where + ".resources must be what a create may ask for "
                                                        "(memory_mb ≥ 64, pids ≥ 16, all within max_resources)");
    for (std::size_t k = 0; k < i; ++k) {
      const auto& o = c.pools[k];
      if (o.image == p.image && o.resources->cpus == r.cpus && o.resources->memory_mb == r.memory_mb &&
          o.resources->pids == r.pids)
        return make_error(errc::invalid_argument, where + " has the same image and resources as pools[" +
                                                      std::to_string(k) + "]");
    }
  }
  return {};
}

bool is_role_name(const std::string& r) { return r == "admin" || r == "member" || r == "viewer"; }

// The maxima are passed to every sandbox's agent as flags, which it checks: a value the agent
// would refuse must fail here, not in every sandbox.
result<void> check_rate_limits_and_maxima(const config& c) {
  const auto& r = c.guardrails.rate_limits;
  for (auto [role, l] : {std::pair{"viewer", r.viewer}, std::pair{"member", r.member}, std::pair{"admin", r.admin},
                         std::pair{"superadmin", r.superadmin}, std::pair{"org", r.org}}) {
    const std::string where = std::string("config: guardrails.rate_limits.") + role;
    if (!(l.rate_per_s >= 0 && l.rate_per_s <= 1e6) || l.burst < 0 || l.burst > 1'000'000'000)
      return make_error(errc::invalid_argument, where + ": rate_per_s must be 0 to 1000000 and burst 0 to 1000000000");
    if (l.rate_per_s > 0 && l.burst < 1)
      return make_error(errc::invalid_argument, where + ".burst must be at least 1 when rate_per_s is set");
  }
  constexpr std::uint64_t agent_max_bytes = std::uint64_t{1} << 30;
  if (c.guardrails.command_log_cap_bytes < 1 || c.guardrails.command_log_cap_bytes > agent_max_bytes)
    return make_error(errc::invalid_argument, "config: guardrails.command_log_cap_bytes must be 1 to 1073741824");
  if (c.output_cap_bytes > agent_max_bytes)
    return make_error(errc::invalid_argument, "config: output_cap_bytes must be at most 1073741824");
  if (c.exec_max_timeout_s > 2'000'000)
    return make_error(errc::invalid_argument, "config: exec_max_timeout_s must be at most 2000000");
  return {};
}

result<void> check_keys_and_host(const config& c) {
  if (c.guardrails.max_api_keys < 1 || c.guardrails.max_api_keys > 1'000'000)
    return make_error(errc::invalid_argument, "config: guardrails.max_api_keys must be 1 to 1000000");
  if (c.host.memory_reserve_mb < 0 || c.host.memory_reserve_mb > (std::int64_t{1} << 40))
    return make_error(errc::invalid_argument, "config: host.memory_reserve_mb must be 0 to 2^40");
  if (!(c.host.memory_overcommit > 0 && c.host.memory_overcommit <= 100))
    return make_error(errc::invalid_argument, "config: host.memory_overcommit must be above 0 and at most 100");
  return {};
}

bool has_control_or_space(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char ch) { return ch <= 0x20 || ch == 0x7f; });
}

// A confidential client's secret, from its own file: refused when others may read it (the
// secret then is not one), when it is empty, or when it is bigger than any secret is.
result<std::string> read_client_secret(const std::string& path, const std::string& where) {
  namespace fs = std::filesystem;
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, "config: " + where + ".console_client_secret_file " + path + ": " + why);
  };
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::is_regular_file(st)) return bad("not a readable file");
  if ((st.permissions() & (fs::perms::others_read | fs::perms::others_write | fs::perms::others_exec)) != fs::perms::none)
    return bad("others may read it; chmod o-rwx (0600 or 0640)");
  constexpr std::uintmax_t max_secret_bytes = 4096;
  if (fs::file_size(path, ec) > max_secret_bytes || ec) return bad("larger than 4096 bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad("cannot be read");
  std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A file written by `echo` ends with a newline that is no part of the secret.
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) return bad("empty");
  if (has_control_or_space(secret)) return bad("the secret has spaces or control characters");
  return secret;
}

// egress.upstream_proxy and its credentials; the password is read here, once, at start, from a
// file only its owner may read or write (0600 or 0400), like the other secret files.
result<void> check_upstream_proxy(egress_config& e) {
  namespace fs = std::filesystem;
  auto bad = [](const std::string& why) { return make_error(errc::invalid_argument, "config: egress." + why); };
  if (e.upstream_proxy.empty()) {
    if (!e.upstream_proxy_username.empty() || !e.upstream_proxy_password_file.empty())
      return bad("upstream_proxy_username and upstream_proxy_password_file need upstream_proxy");
    return {};
  }
  auto colon = e.upstream_proxy.rfind(':');
  auto host = e.upstream_proxy.substr(0, colon == std::string::npos ? 0 : colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto port = colon == std::string::npos ? std::string() : e.upstream_proxy.substr(colon + 1);
  bool port_ok = !port.empty() && port.size() <= 5 &&
                 std::all_of(port.begin(), port.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
                 std::stoi(port) > 0 && std::stoi(port) <= 65535;
  if (host.empty() || host.size() > 253 || !port_ok || has_control_or_space(host) ||
      host.find_first_of("/@") != std::string::npos)
    return bad("upstream_proxy must be HOST:PORT (no scheme, no credentials: those go in upstream_proxy_username "
               "and upstream_proxy_password_file), not '" + e.upstream_proxy + "'");
  if (e.upstream_proxy_username.empty() != e.upstream_proxy_password_file.empty())
    return bad("upstream_proxy_username and upstream_proxy_password_file go together");
  if (e.upstream_proxy_username.empty()) return {};
  if (e.upstream_proxy_username.size() > 256 || has_control_or_space(e.upstream_proxy_username) ||
      e.upstream_proxy_username.find(':') != std::string::npos)
    return bad("upstream_proxy_username must be at most 256 characters without spaces, control characters or ':'");
  const auto& path = e.upstream_proxy_password_file;
  auto file_bad = [&](const std::string& why) { return bad("upstream_proxy_password_file " + path + ": " + why); };
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::is_regular_file(st)) return file_bad("not a readable file");
  constexpr auto others = fs::perms::group_all | fs::perms::others_all | fs::perms::owner_exec;
  if ((st.permissions() & others) != fs::perms::none) return file_bad("its mode must be 0600 (chmod 600)");
  if (fs::file_size(path, ec) > 4096 || ec) return file_bad("larger than 4096 bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) return file_bad("cannot be read");
  std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) return file_bad("empty");
  if (std::any_of(secret.begin(), secret.end(), [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; }))
    return file_bad("the password has control characters");
  e.upstream_proxy_password = std::move(secret);
  return {};
}

// The console sign-in fields of one issuer; the secret is read here, once, at start.
result<void> check_console_sign_in(oidc_issuer_config& is, const std::string& where) {
  auto bad = [&](const std::string& what) { return make_error(errc::invalid_argument, "config: " + where + what); };
  if (is.console_client_id.empty()) {
    if (!is.console_client_secret_file.empty() || !is.console_name.empty())
      return bad(".console_client_secret_file and console_name need console_client_id");
    return {};
  }
  if (is.console_client_id.size() > 256 || has_control_or_space(is.console_client_id))
    return bad(".console_client_id must be at most 256 characters without spaces");
  if (is.console_client_auth != "client_secret_basic" && is.console_client_auth != "client_secret_post")
    return bad(".console_client_auth must be client_secret_basic or client_secret_post");
  if (is.console_name.size() > 100 ||
      std::any_of(is.console_name.begin(), is.console_name.end(), [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; }))
    return bad(".console_name must be at most 100 characters, none of them a control character");
  if (std::find(is.console_scopes.begin(), is.console_scopes.end(), "openid") == is.console_scopes.end())
    return bad(".console_scopes must include openid");
  for (const auto& scope : is.console_scopes)
    if (scope.empty() || scope.size() > 256 || has_control_or_space(scope) || scope.find('"') != std::string::npos)
      return bad(".console_scopes: '" + scope + "' is not a scope token");
  if (!is.console_client_secret_file.empty()) {
    auto secret = read_client_secret(is.console_client_secret_file, where);
    if (!secret) return std::move(secret).err();
    is.console_client_secret = std::move(*secret);
  }
  return {};
}

// console.public_url: an origin, nothing more (the callback's path is the daemon's own).
result<void> check_console(console_config& c) {
  auto& url = c.public_url;
  if (url.empty()) return {};
  while (url.ends_with('/')) url.pop_back();
  auto bad = [] {
    return make_error(errc::invalid_argument,
                      "config: console.public_url must be an origin such as https://sandfort.example.com "
                      "(scheme, host and port only)");
  };
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return bad();
  const std::string scheme = url.substr(0, scheme_end);
  const std::string authority = url.substr(scheme_end + 3);
  if ((scheme != "https" && scheme != "http") || authority.empty() || has_control_or_space(authority) ||
      authority.find_first_of("/?#@\\") != std::string::npos)
    return bad();
  return {};
}

result<void> check_oidc(oidc_config& o) {
  if (o.leeway_s < 0 || o.leeway_s > 600) return make_error(errc::invalid_argument, "config: oidc.leeway_s must be 0 to 600");
  if (o.max_token_bytes < 1024 || o.max_token_bytes > 65536)
    return make_error(errc::invalid_argument, "config: oidc.max_token_bytes must be 1024 to 65536");
  if (o.jwks_min_refresh_s <= 0 || o.jwks_default_cache_s <= 0 || o.jwks_max_cache_s < o.jwks_min_refresh_s ||
      o.fetch_timeout_s <= 0)
    return make_error(errc::invalid_argument,
                      "config: oidc intervals must be positive and jwks_max_cache_s >= jwks_min_refresh_s");
  for (std::size_t i = 0; i < o.issuers.size(); ++i) {
    auto& is = o.issuers[i];
    const std::string where = "config: oidc.issuers[" + std::to_string(i) + "]";
    if (!is.issuer.starts_with("https://") && !is.issuer.starts_with("http://"))
      return make_error(errc::invalid_argument, where + ".issuer must be an https:// URL");
    for (std::size_t k = 0; k < i; ++k)
      if (o.issuers[k].issuer == is.issuer) return make_error(errc::invalid_argument, where + ".issuer is listed twice");
    if (is.audiences.empty() || std::any_of(is.audiences.begin(), is.audiences.end(), [](auto& a) { return a.empty(); }))
      return make_error(errc::invalid_argument, where + ".audience is required");
    if (is.algorithms.empty()) return make_error(errc::invalid_argument, where + ".algorithms must not be empty");
    for (const auto& a : is.algorithms)
      if (a != "RS256" && a != "ES256" && a != "EdDSA")
        return make_error(errc::invalid_argument, where + ".algorithms: '" + a + "' is not one of RS256, ES256, EdDSA");
    if (is.org_claim.empty() == is.org.empty())
      return make_error(errc::invalid_argument, where + " needs exactly one of org_claim and org");
    for (const auto& [value, role] : is.role_map)
      if (!is_role_name(role))
        return make_error(errc::invalid_argument, where + ".role_map: '" + role + "' is not admin, member or viewer");
    if (!is.default_role.empty() && !is_role_name(is.default_role))
      return make_error(errc::invalid_argument, where + ".default_role must be admin, member or viewer");
    if (is.role_claim.empty() && is.default_role.empty())
      return make_error(errc::invalid_argument, where + " grants no role: set role_claim/role_map or default_role");
    if (auto r = check_console_sign_in(is, "oidc.issuers[" + std::to_string(i) + "]"); !r) return r;
  }
  return {};
}

}  // namespace

result<config> load_config(const std::string& file_path, const config_overrides& overrides, char** environ_ptr) {
  json tree = to_json_tree(config{});
  if (!file_path.empty()) {
    std::ifstream in(file_path);
    if (!in) return make_error(errc::invalid_argument, "config: cannot read " + file_path);
    json file = json::parse(in, nullptr, false);
    if (file.is_discarded()) return make_error(errc::invalid_argument, "config: " + file_path + " is not valid JSON");
    if (auto r = overlay(tree, file, ""); !r) return std::move(r).err();
  }
  std::map<std::string, std::string> env;
  for (char** e = environ_ptr; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq && std::strncmp(*e, "SANDFORT_", 9) == 0) env.emplace(std::string(static_cast<const char*>(*e), eq), std::string(eq + 1));
  }
  if (auto r = apply_env(tree, "", env); !r) return std::move(r).err();
  for (const auto& [key, text] : overrides) {
    json* slot = is_object_list(key) ? nullptr : find_key(tree, key);
    if (!slot) return make_error(errc::invalid_argument, "config: unknown key " + key);
    auto v = parse_as(*slot, key, text);
    if (!v) return std::move(v).err();
    *slot = *v;
  }
  auto issuers = read_issuers(tree.at("oidc").at("issuers"));
  if (!issuers) return std::move(issuers).err();
  auto pools = read_pools(tree.at(pools_key));
  if (!pools) return std::move(pools).err();
  config c = from_json_tree(tree);
  c.oidc.issuers = std::move(*issuers);
  c.pools = std::move(*pools);
  return c;
}

result<void> finalize_config(config& c, const std::string& executable_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  c.state_dir = fs::absolute(c.state_dir, ec).lexically_normal().string();
  if (c.database.empty()) c.database = (fs::path(c.state_dir) / "sandfort.db").string();
  if (c.audit.key_path.empty()) c.audit.key_path = (fs::path(c.state_dir) / "audit-signing.key").string();
  c.audit.key_path = fs::absolute(c.audit.key_path, ec).lexically_normal().string();
  if (c.secrets.key_file.empty()) c.secrets.key_file = (fs::path(c.state_dir) / "secrets.key").string();
  c.secrets.key_file = fs::absolute(c.secrets.key_file, ec).lexically_normal().string();
  if (!c.secrets.upstream_ca_file.empty())
    c.secrets.upstream_ca_file = fs::absolute(c.secrets.upstream_ca_file, ec).lexically_normal().string();
  if (c.secrets.max_per_org < 1 || c.secrets.max_per_org > 100000)
    return make_error(errc::invalid_argument, "config: secrets.max_per_org must be between 1 and 100000");
  if (c.secrets.max_value_bytes < 1 || c.secrets.max_value_bytes > 65536)
    return make_error(errc::invalid_argument, "config: secrets.max_value_bytes must be between 1 and 65536");
  {
    const auto& w = c.webhooks;
    if (w.max_per_org < 0 || w.max_per_org > 1000)
      return make_error(errc::invalid_argument, "config: webhooks.max_per_org must be between 0 and 1000");
    if (w.concurrency < 1 || w.concurrency > 64)
      return make_error(errc::invalid_argument, "config: webhooks.concurrency must be between 1 and 64");
    if (w.timeout_s < 1 || w.timeout_s > 300)
      return make_error(errc::invalid_argument, "config: webhooks.timeout_s must be between 1 and 300");
    if (w.retry_base_ms < 1 || w.retry_max_ms < w.retry_base_ms)
      return make_error(errc::invalid_argument,
                        "config: webhooks.retry_base_ms must be positive and webhooks.retry_max_ms at least as large");
    if (w.max_age_s < 1 || w.poll_interval_ms < 10 || w.log_retention_s < 1)
      return make_error(errc::invalid_argument,
                        "config: webhooks.max_age_s and log_retention_s must be positive, poll_interval_ms at least 10");
  }
  if (c.audit.checkpoint_interval_s <= 0 || c.audit.summary_interval_s <= 0)
    return make_error(errc::invalid_argument, "config: audit intervals must be positive");
  if (c.default_runtime != "runc" && c.default_runtime != "gvisor")
    return make_error(errc::invalid_argument, "config: default_runtime must be runc or gvisor");
  if (c.default_runtime == "gvisor" && c.gvisor_runtime.empty())
    return make_error(errc::invalid_argument, "config: default_runtime gvisor needs gvisor_runtime");
  if (auto r = check_allowed_runtimes(c); !r) return r;
  if (auto r = check_store(c.store); !r) return r;
  if (auto r = check_disk(c.disk); !r) return r;
  if (c.guardrails.max_sandboxes < 0 || !(c.guardrails.max_cpus >= 0) || c.guardrails.max_memory_mb < 0 ||
      c.guardrails.max_disk_mb < 0 || c.guardrails.max_volumes < 0 || c.guardrails.max_snapshots < 0 ||
      c.guardrails.default_idle_timeout_s < 0 || c.guardrails.delete_grace_s < 0)
    return make_error(errc::invalid_argument, "config: guardrails limits and times must not be negative");
  if (c.agent_path.empty()) {
    // In the build tree the agent sits in ../agent; installed, it sits beside sandfortd.
    fs::path beside = fs::path(executable_dir) / "sandfort-agent";
    fs::path build_tree = fs::path(executable_dir) / ".." / "agent" / "sandfort-agent";
    c.agent_path = (fs::exists(beside) ? beside : build_tree).lexically_normal().string();
  }
  c.agent_path = fs::absolute(c.agent_path, ec).lexically_normal().string();
  if (c.log_format != "text" && c.log_format != "json")
    return make_error(errc::invalid_argument, "config: log_format must be text or json");
  if (c.listen.find(':') == std::string::npos)
    return make_error(errc::invalid_argument, "config: listen must be HOST:PORT");
  if (c.agent_idle_timeout_s <= 0) return make_error(errc::invalid_argument, "config: agent_idle_timeout_s must be positive");
  // Under the agent's own idle timeout (60 s), so that the daemon lets a connection go first.
  if (c.agent_keepalive_s < 0 || c.agent_keepalive_s > 30)
    return make_error(errc::invalid_argument, "config: agent_keepalive_s must be between 0 and 30");
  // An answer of the largest allowed output must fit, or such commands could never succeed.
  if (c.agent_response_budget_mb * (1u << 20) < 4 * c.output_cap_bytes)
    return make_error(errc::invalid_argument, "config: agent_response_budget_mb must hold at least 4 × output_cap_bytes");
  if (c.network.bridge.empty() || c.network.bridge.size() > 15)
    return make_error(errc::invalid_argument, "config: network.bridge must be 1 to 15 characters (an interface name)");
  if (c.network.name.empty()) return make_error(errc::invalid_argument, "config: network.name must not be empty");
  if (c.egress.proxy_port <= 0 || c.egress.proxy_port > 65535)
    return make_error(errc::invalid_argument, "config: egress.proxy_port must be 1 to 65535");
  if (c.egress.connect_timeout_s <= 0 || c.egress.idle_timeout_s <= 0 || c.egress.max_tunnels_per_sandbox <= 0)
    return make_error(errc::invalid_argument, "config: egress timeouts and max_tunnels_per_sandbox must be positive");
  if (c.preview.listen.find(':') == std::string::npos)
    return make_error(errc::invalid_argument, "config: preview.listen must be HOST:PORT");
  if (c.tls.cert_file.empty() != c.tls.key_file.empty())
    return make_error(errc::invalid_argument, "config: tls.cert_file and tls.key_file go together");
  if (c.tls.enabled()) {
    c.tls.cert_file = fs::absolute(c.tls.cert_file, ec).lexically_normal().string();
    c.tls.key_file = fs::absolute(c.tls.key_file, ec).lexically_normal().string();
  }
  if (c.preview.domain.empty() || c.preview.domain.front() == '.' || c.preview.domain.back() == '.')
    return make_error(errc::invalid_argument, "config: preview.domain must be a domain name like preview.localhost");
  if (c.exec_default_timeout_s <= 0 || c.exec_max_timeout_s < c.exec_default_timeout_s)
    return make_error(errc::invalid_argument, "config: exec timeouts must satisfy 0 < default <= max");
  if (c.max_connections <= 0 || c.preview.max_connections <= 0)
    return make_error(errc::invalid_argument, "config: max_connections and preview.max_connections must be positive");
  if (c.max_idle_connections_per_source <= 0 || c.max_idle_connections <= 0 ||
      c.preview.max_idle_connections_per_source <= 0 || c.preview.max_idle_connections <= 0)
    return make_error(errc::invalid_argument,
                      "config: max_idle_connections_per_source and max_idle_connections (also under preview) must be "
                      "positive");
  if (c.egress.max_pending_per_source <= 0 || c.egress.max_pending <= 0 || c.egress.max_tunnels <= 0)
    return make_error(errc::invalid_argument,
                      "config: egress.max_pending_per_source, max_pending and max_tunnels must be positive");
  if (auto r = check_upstream_proxy(c.egress); !r) return r;
  for (const auto& r : c.images.allowed_registries)
    if (r.empty() || r.size() > 255 || r.find_first_of("/@ \t\r\n") != std::string::npos)
      return make_error(errc::invalid_argument, "config: images.allowed_registries entry '" + r +
                                                    "' must be a registry host[:port] or '*'");
  if (auto r = check_rate_limits_and_maxima(c); !r) return r;
  if (auto r = check_keys_and_host(c); !r) return r;
  if (auto r = finalize_pools(c); !r) return r;
  if (auto r = check_console(c.console); !r) return r;
  return check_oidc(c.oidc);
}

}  // namespace sandfort
