// `sandfort volume …` and `sandfort snapshot …` but their create: the organization's named resources
// (commands.hpp, named_resource), the same four commands over two collections of the API.
#include <iostream>
#include <nlohmann/json.hpp>

#include "api_client.hpp"
#include "commands.hpp"

namespace sandfort::cli {
using nlohmann::json;

namespace {

std::string member_path(const named_resource& r, const std::string& name) {
  return std::string(r.collection) + "/" + url_encode(name);
}

}  // namespace

int cmd_named_create(const named_resource& r, const json& body, bool as_json) {
  api_client client = connect_api();
  print_created(client.call(verb::post, r.collection, &body), as_json);
  return 0;
}

int cmd_named_ls(const named_resource& r, bool as_json) {
  api_client client = connect_api();
  print_listing(client, r.collection, r.columns, as_json);
  return 0;
}

int cmd_named_get(const named_resource& r, const std::string& name, bool as_json) {
  api_client client = connect_api();
  json got = client.call(verb::get, member_path(r, name));
  if (as_json)
    std::cout << got.dump(2) << "\n";
  else
    print_fields(got, r.fields);
  return 0;
}

int cmd_named_rm(const named_resource& r, const std::vector<std::string>& names) {
  api_client client = connect_api();
  for (const auto& name : names) {
    client.call(verb::delete_, member_path(r, name));
    std::cout << "deleted " << name << "\n";
  }
  return 0;
}

}  // namespace sandfort::cli
