// A `docker load` archive that carries an image's config and no layer (engine.hpp says when the
// engine accepts one): how a snapshot's image gets a config sandfortd wrote itself.
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "sandfort/crypto/digest.hpp"
#include "json_access.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/image_archive.hpp"

namespace sandfort::docker {

namespace {

// One entry in POSIX ustar form: a 512-byte header, the data, padding to 512. A regular file
// ('0', mode 0644) or a directory ('5', mode 0755, no data).
void append_archive_entry(std::string& out, const std::string& name, const std::string& data, char type) {
  char header[512];
  std::memset(header, 0, sizeof header);
  std::snprintf(header, 100, "%s", name.c_str());
  std::snprintf(header + 100, 8, "%07o", type == '5' ? 0755u : 0644u);
  std::snprintf(header + 108, 8, "%07o", 0u);
  std::snprintf(header + 116, 8, "%07o", 0u);
  std::snprintf(header + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
  std::snprintf(header + 136, 12, "%011o", 0u);
  header[156] = type;
  std::memcpy(header + 257, "ustar", 6);
  std::memcpy(header + 263, "00", 2);
  std::memset(header + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : header) sum += c;
  std::snprintf(header + 148, 8, "%06o", sum);
  out.append(header, sizeof header);
  out += data;
  out.append((512 - data.size() % 512) % 512, '\0');
}

void append_archive_file(std::string& out, const std::string& name, const std::string& data) {
  append_archive_entry(out, name, data, '0');
}

}  // namespace

std::string layerless_image_archive(const std::string& config_json, const std::string& repo_tag,
                                    std::size_t layer_count) {
  const std::string config_name = sha256_hex(config_json) + ".json";
  nlohmann::json layers = nlohmann::json::array();
  // Named but absent: the engine reads a layer's file only when it lacks that layer.
  for (std::size_t i = 0; i < layer_count; ++i) layers.push_back(std::to_string(i) + "/layer.tar");
  nlohmann::json manifest = nlohmann::json::array(
      {{{"Config", config_name}, {"RepoTags", nlohmann::json::array({repo_tag})}, {"Layers", layers}}});
  std::string out;
  append_archive_file(out, config_name, config_json);
  append_archive_file(out, "manifest.json", manifest.dump());
  out.append(1024, '\0');  // two empty blocks end the archive
  return out;
}

std::string directory_archive(const std::string& name) {
  std::string out;
  append_archive_entry(out, name + "/", "", '5');
  out.append(1024, '\0');
  return out;
}

std::string files_archive(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out;
  for (const auto& [name, data] : entries) {
    if (!name.empty() && name.back() == '/')
      append_archive_entry(out, name, "", '5');
    else
      append_archive_file(out, name, data);
  }
  out.append(1024, '\0');
  return out;
}

nlohmann::json rewritten_image_config(const nlohmann::json& committed, const nlohmann::json& parent,
                                      const std::map<std::string, std::string>& labels) {
  using detail::member;
  nlohmann::json config = nlohmann::json::object();
  const nlohmann::json& from = member(parent, "Config");
  for (const char* key : {"Env", "Cmd", "Entrypoint", "WorkingDir", "User", "ExposedPorts", "Volumes", "StopSignal",
                          "Shell", "Healthcheck", "OnBuild"})
    if (const nlohmann::json& v = member(from, key); !v.is_null()) config[key] = v;
  config["Labels"] = labels;
  nlohmann::json out = {{"architecture", member(committed, "Architecture")},
                        {"os", member(committed, "Os")},
                        {"created", member(committed, "Created")},
                        {"config", std::move(config)},
                        {"rootfs", {{"type", "layers"}, {"diff_ids", member(member(committed, "RootFS"), "Layers")}}},
                        {"history", nlohmann::json::array()}};
  if (const nlohmann::json& variant = member(committed, "Variant"); variant.is_string()) out["variant"] = variant;
  return out;
}

}  // namespace sandfort::docker
