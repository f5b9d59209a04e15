// `sandfort volume …`: the organization's named volumes through the API (docs/api.md, "Volumes"),
// and the `--volume NAME:/path[:ro]` of `sandbox create` and `new`.
#include <iostream>
#include <nlohmann/json.hpp>

#include "api_client.hpp"
#include "commands.hpp"
#include "failure.hpp"

namespace sandfort::cli {
using nlohmann::json;

namespace {

std::string volume_path(const std::string& name) { return "/v1/volumes/" + url_encode(name); }


}  // namespace

// The path is the server's to check (its 400 names what is wrong with it).
json volume_mount(const std::string& spec) {
  auto colon = spec.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size())
    throw failure("--volume takes NAME:/path[:ro], got \"" + spec + "\"", 2);
  std::string path = spec.substr(colon + 1);
  bool read_only = false;
  if (auto last = path.rfind(':'); last != std::string::npos) {
    std::string mode = path.substr(last + 1);
    if (mode != "ro" && mode != "rw") throw failure("--volume takes NAME:/path[:ro], got \"" + spec + "\"", 2);
    read_only = mode == "ro";
    path.erase(last);
  }
  return {{"name", spec.substr(0, colon)}, {"mount_path", path}, {"read_only", read_only}};
}

int cmd_volume_create(const std::string& name, bool as_json) {
  api_client client = connect_api();
  json body = {{"name", name}};
  json vol = client.call(verb::post, "/v1/volumes", &body);
  if (as_json)
    std::cout << vol.dump(2) << "\n";
  else
    std::cout << cell(vol, "id") << "\n";
  return 0;
}

int cmd_volume_ls(bool as_json) {
  api_client client = connect_api();
  json all = list_all(client, "/v1/volumes");
  if (as_json) {
    std::cout << json{{"items", all}}.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "STATE", "CREATED"}};
  for (const auto& v : all) rows.push_back({cell(v, "id"), cell(v, "name"), cell(v, "state"), cell(v, "created_at")});
  print_table(rows);
  return 0;
}

int cmd_volume_get(const std::string& name, bool as_json) {
  api_client client = connect_api();
  json vol = client.call(verb::get, volume_path(name));
  if (as_json) {
    std::cout << vol.dump(2) << "\n";
    return 0;
  }
  for (const char* key : {"id", "name", "state", "size_mb", "created_at", "updated_at"})
    if (vol.contains(key)) std::cout << key << ": " << cell(vol, key) << "\n";
  return 0;
}

int cmd_volume_rm(const std::vector<std::string>& names) {
  api_client client = connect_api();
  for (const auto& name : names) {
    client.call(verb::delete_, volume_path(name));
    std::cout << "deleted " << name << "\n";
  }
  return 0;
}

}  // namespace sandfort::cli
