// An organization's snapshots: the named-resource routes (named_resource_routes.hpp) with a
// snapshot's create body (the sandbox to commit) and JSON.
#include "named_resource_routes.hpp"

namespace sandfort::api {

namespace {

struct snapshots_api {
  using create = sandbox::snapshot_create_request;
  static constexpr const char* collection = "/v1/snapshots";
  static constexpr std::tuple fields{body_field{"sandbox_id", &create::sandbox_id}, body_field{"name", &create::name}};
  static snapshot_backend& backend(dependencies& deps) { return deps.snapshots; }
  static nlohmann::json to_json(const sandbox::snapshot_view& v) {
    auto j = named_json(v);
    j["size_bytes"] = v.size_bytes;
    j["source_sandbox_id"] = v.source_sandbox_id;
    return j;
  }
};

}  // namespace

std::vector<api_route> snapshot_routes() { return named_resource_routes<snapshots_api>(); }

}  // namespace sandfort::api
