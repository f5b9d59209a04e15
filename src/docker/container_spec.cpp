#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"

#include <cmath>
#include <cstdio>

#include "spec_validation.hpp"

namespace sandfort::docker {

namespace {

std::string bind_string(const bind_mount& b) {
  return b.host_path + ":" + b.container_path + (b.read_only ? ":ro" : "");
}

std::int64_t nano_cpus(double cpus) {
  if (!(cpus > 0)) return 0;  // also NaN: no limit rather than garbage
  return std::llround(cpus * 1e9);
}

void set_if_not_empty(nlohmann::json& j, const char* key, const std::string& value) {
  if (!value.empty()) j[key] = value;
}

template <typename Container>
void set_if_not_empty(nlohmann::json& j, const char* key, const Container& values) {
  if (!values.empty()) j[key] = values;
}

std::string tmpfs_options(const tmpfs_mount& t) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%o", t.mode & 07777);
  return "rw,nosuid,nodev,noexec,size=" + std::to_string(t.size_bytes) + ",nr_inodes=" + std::to_string(t.inodes) +
         ",mode=" + mode;
}

nlohmann::json host_config(const container_spec& spec) {
  nlohmann::json binds = nlohmann::json::array();
  for (const auto& b : spec.binds) binds.push_back(bind_string(b));
  nlohmann::json tmpfs = nlohmann::json::object();
  for (const auto& t : spec.tmpfs) tmpfs[t.container_path] = tmpfs_options(t);
  nlohmann::json mounts = nlohmann::json::array();
  for (const auto& v : spec.volumes)
    mounts.push_back({{"Type", "volume"},
                      {"Source", v.volume},
                      {"Target", v.container_path},
                      {"ReadOnly", v.read_only},
                      {"VolumeOptions", {{"NoCopy", v.no_copy}}}});
  nlohmann::json hc = {
      {"Init", spec.init},
      {"Binds", std::move(binds)},
      {"Tmpfs", std::move(tmpfs)},
      {"NanoCpus", nano_cpus(spec.cpus)},
      {"Memory", spec.memory_bytes},
      {"MemorySwap", spec.memory_bytes},  // equal to Memory: the container gets no swap
      {"PidsLimit", spec.pids_limit},
      {"CapDrop", {"ALL"}},
      {"CapAdd", spec.cap_add},
      {"SecurityOpt", {"no-new-privileges"}},
      {"NetworkMode", spec.network_mode},
      {"Privileged", false},
      {"ReadonlyRootfs", false},
      {"LogConfig", {{"Type", "json-file"}, {"Config", {{"max-size", "10m"}, {"max-file", "1"}}}}},
  };
  if (!mounts.empty()) hc["Mounts"] = std::move(mounts);
  if (!spec.dns_options.empty()) hc["DnsOptions"] = spec.dns_options;
  if (spec.storage_size_mb > 0) hc["StorageOpt"] = {{"size", std::to_string(spec.storage_size_mb) + "M"}};
  set_if_not_empty(hc, "Runtime", spec.runtime);
  return hc;
}

bool path_is_safe_for_binds(const std::string& p) {
  return !p.empty() && p.front() == '/' && p.find_first_of(":,") == std::string::npos &&
         p.find('\0') == std::string::npos;
}

bool name_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

}  // namespace

nlohmann::json to_create_body(const container_spec& spec) {
  nlohmann::json body = {{"Image", spec.image}};
  set_if_not_empty(body, "Entrypoint", spec.entrypoint);
  set_if_not_empty(body, "Cmd", spec.cmd);
  set_if_not_empty(body, "Env", spec.env);
  set_if_not_empty(body, "Labels", spec.labels);
  set_if_not_empty(body, "Hostname", spec.hostname);
  set_if_not_empty(body, "User", spec.user);
  set_if_not_empty(body, "WorkingDir", spec.workdir);
  body["HostConfig"] = host_config(spec);
  body["StopTimeout"] = spec.stop_timeout_s;
  body["AttachStdin"] = false;
  body["AttachStdout"] = false;
  body["AttachStderr"] = false;
  body["Tty"] = false;
  body["OpenStdin"] = false;
  return body;
}

namespace detail {

result<void> validate_spec(const container_spec& spec) {
  if (spec.image.empty()) return make_error(errc::invalid_argument, "a container needs an image");
  // Docker's own rule for names: [a-zA-Z0-9][a-zA-Z0-9_.-]*
  if (!spec.name.empty()) {
    bool ok = spec.name.front() != '_' && spec.name.front() != '.' && spec.name.front() != '-';
    for (char c : spec.name) ok = ok && name_char_ok(c);
    if (!ok)
      return make_error(errc::invalid_argument,
                        "container name \"" + spec.name + "\" may use only letters, digits, '_', '.' and '-'");
  }
  for (const auto& b : spec.binds) {
    if (!path_is_safe_for_binds(b.host_path) || !path_is_safe_for_binds(b.container_path))
      return make_error(errc::invalid_argument, "bind mount \"" + b.host_path + "\" -> \"" + b.container_path +
                                                    "\": both paths must be absolute and contain no ':' or ','");
  }
  for (const auto& t : spec.tmpfs) {
    if (!path_is_safe_for_binds(t.container_path) || t.size_bytes <= 0 || t.inodes <= 0)
      return make_error(errc::invalid_argument, "tmpfs \"" + t.container_path +
                                                    "\": the path must be absolute without ':' or ',', the size positive");
  }
  for (const auto& v : spec.volumes) {
    bool ok = !v.volume.empty() && v.volume.front() != '_' && v.volume.front() != '.' && v.volume.front() != '-';
    for (char c : v.volume) ok = ok && name_char_ok(c);
    if (!ok || !path_is_safe_for_binds(v.container_path) || v.container_path == "/")
      return make_error(errc::invalid_argument, "volume \"" + v.volume + "\" -> \"" + v.container_path +
                                                    "\": a plain volume name and an absolute path other than /");
  }
  if (spec.memory_bytes < 0 || spec.pids_limit < 0 || spec.stop_timeout_s < 0 || !(spec.cpus >= 0))
    return make_error(errc::invalid_argument, "container limits must not be negative");
  return {};
}

}  // namespace detail

}  // namespace sandfort::docker
