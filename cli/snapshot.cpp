// `sandfort snapshot …`: the organization's snapshots through the API (docs/api.md, "Snapshots");
// `sandbox create --snapshot NAME` and `new --snapshot NAME` create from one.
#include <iostream>
#include <nlohmann/json.hpp>

#include "api_client.hpp"
#include "commands.hpp"

namespace sandfort::cli {
using nlohmann::json;

namespace {

std::string snapshot_path(const std::string& name) { return "/v1/snapshots/" + url_encode(name); }


}  // namespace

int cmd_snapshot_create(const std::string& sandbox, const std::string& name, bool as_json) {
  api_client client = connect_api();
  json body = {{"sandbox_id", sandbox}, {"name", name}};
  json snap = client.call(verb::post, "/v1/snapshots", &body);
  if (as_json)
    std::cout << snap.dump(2) << "\n";
  else
    std::cout << cell(snap, "id") << "\n";
  return 0;
}

int cmd_snapshot_ls(bool as_json) {
  api_client client = connect_api();
  json all = list_all(client, "/v1/snapshots");
  if (as_json) {
    std::cout << json{{"items", all}}.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "STATE", "SIZE", "SOURCE", "CREATED"}};
  for (const auto& v : all)
    rows.push_back({cell(v, "id"), cell(v, "name"), cell(v, "state"), cell(v, "size_bytes"),
                    cell(v, "source_sandbox_id"), cell(v, "created_at")});
  print_table(rows);
  return 0;
}

int cmd_snapshot_get(const std::string& name, bool as_json) {
  api_client client = connect_api();
  json snap = client.call(verb::get, snapshot_path(name));
  if (as_json) {
    std::cout << snap.dump(2) << "\n";
    return 0;
  }
  for (const char* key : {"id", "name", "state", "size_bytes", "source_sandbox_id", "created_at", "updated_at"})
    if (snap.contains(key)) std::cout << key << ": " << cell(snap, key) << "\n";
  return 0;
}

int cmd_snapshot_rm(const std::vector<std::string>& names) {
  api_client client = connect_api();
  for (const auto& name : names) {
    client.call(verb::delete_, snapshot_path(name));
    std::cout << "deleted " << name << "\n";
  }
  return 0;
}

}  // namespace sandfort::cli
