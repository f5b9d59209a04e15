// An organization's volumes: the named-resource routes (named_resource_routes.hpp) with a
// volume's create body and JSON.
#include "named_resource_routes.hpp"

namespace sandfort::api {

namespace {

struct volumes_api {
  using create = sandbox::volume_create_request;
  static constexpr const char* collection = "/v1/volumes";
  static constexpr std::tuple fields{body_field{"name", &create::name}, body_field{"size_mb", &create::size_mb}};
  static volume_backend& backend(dependencies& deps) { return deps.volumes; }
  static nlohmann::json to_json(const sandbox::volume_view& v) {
    auto j = named_json(v);
    j["size_mb"] = v.size_mb ? nlohmann::json(*v.size_mb) : nlohmann::json(nullptr);
    return j;
  }
};

}  // namespace

std::vector<api_route> volume_routes() { return named_resource_routes<volumes_api>(); }

}  // namespace sandfort::api
