// `sandfort snapshot …`: the organization's snapshots through the API (docs/api.md, "Snapshots");
// `sandbox create --snapshot NAME` and `new --snapshot NAME` create from one.
#include <nlohmann/json.hpp>

#include "commands.hpp"

namespace sandfort::cli {

const named_resource snapshot_resource = {
    "/v1/snapshots",
    {{"ID", "id"}, {"NAME", "name"}, {"STATE", "state"}, {"SIZE", "size_bytes"}, {"SOURCE", "source_sandbox_id"},
     {"CREATED", "created_at"}},
    {"id", "name", "state", "size_bytes", "source_sandbox_id", "created_at", "updated_at"}};

int cmd_snapshot_create(const std::string& sandbox, const std::string& name, bool as_json) {
  return cmd_named_create(snapshot_resource, {{"sandbox_id", sandbox}, {"name", name}}, as_json);
}

}  // namespace sandfort::cli
