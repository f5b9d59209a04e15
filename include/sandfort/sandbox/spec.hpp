#pragma once
// What a sandbox is made of, apart from the service that runs it (src/sandbox/spec.cpp): a
// create request checked into a spec, the spec as the store keeps it (JSON), and the container
// (the Docker fields: limits, mounts, labels, environment) made from a spec. The container is
// built from an allowlist of fields: nothing a caller sends reaches Docker's HostConfig directly.
// Labels tie containers, volumes and images back to rows.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandfort/core/config.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

inline constexpr const char* label_sandbox = "io.sandfort.sandbox";
inline constexpr const char* label_org = "io.sandfort.org";
inline constexpr const char* label_instance = "io.sandfort.instance";
inline constexpr const char* label_network = "io.sandfort.network";
inline constexpr const char* label_pool = "io.sandfort.pool";

// A fresh container name that says nothing about the sandbox: Docker's embedded DNS answers
// every container's name to its neighbours. Labels tie containers back to rows.
std::string new_container_name();
// How the agent connector finds a sandbox's agent.
agent_address agent_address_of(const store::sandbox_record& rec);

// The working directory of a sandbox whose create named none (docs/images.md): the agent makes
// it, as the sandbox's user, at every start and claim.
inline constexpr const char* default_workdir = "/work";
// Where a sandbox that dials home finds its door (src/home/door.hpp), mounted read-only.
inline constexpr const char* home_in_container = "/run/sandfort/home";
// The host directory holding one door directory per sandbox: <state_dir>/home.
std::string home_root(const config& cfg);
inline std::string effective_workdir(const sandbox_spec& spec) {
  return spec.workdir.empty() ? default_workdir : spec.workdir;
}

// A create request checked against the configured maxima and defaults, as the spec it asks for.
result<sandbox_spec> validate_create(const config& cfg, const create_request& req);
// One host pattern of an egress allowlist: "host", "*.suffix" or "*" (also what a secret's
// hosts are checked with, docs/secrets.md).
bool valid_host_pattern(const std::string& h);
// Host patterns of an egress allowlist: "host", "*.suffix" or "*".
result<void> validate_allowlist(const std::vector<std::string>& allowlist);
// egress_rules as the API and the stored spec write them: [{host, methods?, paths?}], methods and
// paths left out when empty. Reading refuses unknown fields and wrong types (not the bounds and
// patterns: proxy::validate_rule_set checks those).
nlohmann::json egress_rules_to_json(const std::vector<proxy::egress_rule>& rules);
result<std::vector<proxy::egress_rule>> egress_rules_from_json(const nlohmann::json& list);
// idle_timeout_s, when given: 0 (never) up to 30 days.
result<void> check_idle_timeout(const std::optional<std::int64_t>& idle_timeout_s);

// Organization secrets on a sandbox (docs/secrets.md): at most this many per sandbox; the variable
// a secret's placeholder is in when the create names none ("openai-prod" → OPENAI_PROD).
inline constexpr std::size_t max_attached_secrets = 16;
std::string default_secret_env(const std::string& name);
// Where a sandbox that trusts its organization's interception CA finds it: the CA alone (also in
// update-ca-certificates' directory), and a bundle of the daemon host's trust store plus the CA.
inline constexpr const char* interception_ca_path = "/usr/local/share/ca-certificates/sandfort-interception.crt";
inline constexpr const char* interception_bundle_path = "/etc/sandfort/ca-certificates.crt";
// The placeholders of a spec's secrets, and the CA variables when it trusts the CA.
void add_secret_environment(const sandbox_spec& spec, std::map<std::string, std::string>& env);

// The environment that sends a sandbox's HTTP clients through the egress proxy.
std::vector<std::string> proxy_environment(const std::string& sandbox_id, const std::string& secret,
                                           const std::string& gateway, int port);
// The sandbox's environment as its processes see it: the caller's variables, then the proxy's.
std::map<std::string, std::string> sandbox_environment(const std::string& sandbox_id, const sandbox_spec& spec,
                                                       const std::string& proxy_secret, const std::string& gateway,
                                                       int proxy_port);

// Where a container is made: what of it is the daemon's and not the sandbox's.
struct container_site {
  std::string instance_id;  // this daemon's (the label_instance of everything it makes)
  std::string network;      // the sandbox network's name
  std::string gateway;      // where the egress proxy listens on it
  bool hard_disk = false;   // the engine's storage enforces disk_mb (src/sandbox/disk_guard.cpp)
  std::string home_root;    // the doors of sandboxes that dial home: <home_root>/<sandbox id> (src/home)
  std::string gvisor_preload;  // the host file gVisor sandboxes preload (gvisor_preload.hpp); empty: none
};
// The container of a sandbox, made from `image` by its id. Every label of the image that
// sandfortd does not set is set empty: Docker would merge the image's labels into the
// container's, and a container's labels are sandfortd's own.
docker::container_spec container_for(const config& cfg, const container_site& site, const store::sandbox_record& rec,
                                     const sandbox_spec& spec, const std::string& proxy_secret,
                                     const docker::image_details& image);

// The disk_mb a sandbox may hold: its own, or disk.default_mb for rows made before disk_mb was.
inline std::int64_t disk_limit_mb(const resources& r, const disk_config& d) {
  return r.disk_mb > 0 ? r.disk_mb : d.default_mb;
}

// Serialization of the stored spec (the store keeps it as opaque JSON text).
std::string spec_to_json(const sandbox_spec& spec);
sandbox_spec spec_from_json(const std::string& text);
// A stored row as callers see it.
sandbox_view to_view(const store::sandbox_record& rec);

// Why a sandbox's container stopped by itself ("the container exited with code 137 (out of
// memory)"): the same words whether Docker's events or a failed call noticed it first
// (src/sandbox/container_events.cpp). `gvisor`: the container ran under runsc, where exit code 2
// is gVisor's own kernel failing, as it does when the sandbox reaches its pids limit (runsc's
// threads count against it; docs/gvisor.md): said so, since the code alone says nothing.
std::string container_exit_reason(int exit_code, bool oom_killed, bool gvisor = false);
// Whether a stored row's spec asks for gVisor.
bool runs_on_gvisor(const store::sandbox_record& rec);

}  // namespace sandfort::sandbox
