#pragma once
// docs/openapi.yaml as built into the daemon (cmake/embed_openapi.py): the document, and the same
// as JSON.
#include <string_view>

namespace sandfort::api {

std::string_view openapi_yaml();
std::string_view openapi_json();

}  // namespace sandfort::api
