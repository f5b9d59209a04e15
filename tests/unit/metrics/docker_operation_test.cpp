// How the Docker latency histogram names engine calls: one of a small fixed set, whatever the
// ids, names and query strings in the target.
#include <catch2/catch.hpp>
#include <set>

#include "operation.hpp"

using sandfort::docker::detail::operation_of;
using boost::beast::http::verb;

TEST_CASE("docker operations: calls are named by resource and action", "[metrics]") {
  CHECK(operation_of(verb::get, "/version") == "version");
  CHECK(operation_of(verb::post, "/v1.43/containers/create?name=sandfort-0123") == "container_create");
  CHECK(operation_of(verb::post, "/v1.43/containers/abc123/start") == "container_start");
  CHECK(operation_of(verb::post, "/v1.43/containers/abc123/stop?t=10") == "container_stop");
  CHECK(operation_of(verb::post, "/v1.43/containers/abc123/pause") == "container_pause");
  CHECK(operation_of(verb::post, "/v1.43/containers/abc123/unpause") == "container_unpause");
  CHECK(operation_of(verb::delete_, "/v1.43/containers/abc123?force=true&v=true") == "container_remove");
  CHECK(operation_of(verb::get, "/v1.43/containers/abc123/json") == "container_inspect");
  CHECK(operation_of(verb::get, "/v1.43/containers/json?all=true&filters=x") == "container_list");
  CHECK(operation_of(verb::get, "/v1.43/containers/abc123/stats?stream=false") == "container_stats");
  CHECK(operation_of(verb::post, "/v1.43/commit?container=abc&repo=r") == "container_commit");
  CHECK(operation_of(verb::post, "/v1.43/images/create?fromImage=sandfort/base&tag=bookworm") == "image_pull");
  CHECK(operation_of(verb::get, "/v1.43/images/sandfort/base:bookworm/json") == "image_inspect");
  CHECK(operation_of(verb::get, "/v1.43/images/json") == "image_list");
  CHECK(operation_of(verb::delete_, "/v1.43/images/sandfort/snap:abc") == "image_remove");
  CHECK(operation_of(verb::post, "/v1.43/networks/create") == "network_create");
  CHECK(operation_of(verb::get, "/v1.43/networks/sandfort") == "network_inspect");
  CHECK(operation_of(verb::post, "/v1.43/volumes/create") == "volume_create");
  CHECK(operation_of(verb::delete_, "/v1.43/volumes/sfv-1") == "volume_remove");
  CHECK(operation_of(verb::get, "/v1.43/volumes?filters=x") == "volume_list");
}

TEST_CASE("docker operations: the set of names is bounded", "[metrics]") {
  std::set<std::string> names;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = "c" + std::to_string(i);
    names.insert(operation_of(verb::post, "/v1.43/containers/" + id + "/action" + std::to_string(i)));
    names.insert(operation_of(verb::get, "/v1.43/images/img" + std::to_string(i) + "/json"));
    names.insert(operation_of(verb::put, "/v1.43/" + id));
    names.insert(operation_of(verb::get, "/weird/" + id));
  }
  CHECK(names == std::set<std::string>{"container_other", "image_inspect", "other"});
  CHECK(operation_of(verb::get, "") == "other");
  CHECK(operation_of(verb::get, "/v1.43") == "other");
}
