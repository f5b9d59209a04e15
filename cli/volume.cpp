// `sandfort volume …`: the organization's named volumes through the API (docs/api.md, "Volumes"),
// and the `--volume NAME:/path[:ro]` of `sandbox create` and `new`.
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "failure.hpp"

namespace sandfort::cli {
using nlohmann::json;

const named_resource volume_resource = {
    "/v1/volumes",
    {{"ID", "id"}, {"NAME", "name"}, {"STATE", "state"}, {"CREATED", "created_at"}},
    {"id", "name", "state", "size_mb", "created_at", "updated_at"}};

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
  return cmd_named_create(volume_resource, {{"name", name}}, as_json);
}

}  // namespace sandfort::cli
