#include "operation.hpp"

#include <array>
#include <vector>

namespace sandfort::docker::detail {

namespace {

using boost::beast::http::verb;

std::vector<std::string_view> segments_of(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < path.size()) {
    auto slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

// The resource of the first segment, in the singular; empty when it is none of ours.
std::string_view resource_of(std::string_view first) {
  if (first == "containers") return "container";
  if (first == "images") return "image";
  if (first == "networks") return "network";
  if (first == "volumes") return "volume";
  return {};
}

bool is_container_action(std::string_view word) {
  constexpr std::array<std::string_view, 8> known = {"start", "stop", "pause", "unpause", "kill", "restart", "wait", "exec"};
  for (auto k : known)
    if (word == k) return true;
  return false;
}

}  // namespace

std::string operation_of(verb method, std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  // "/v1.43/…": the API version is not part of the operation.
  if (path.size() > 2 && path[0] == '/' && path[1] == 'v' && path[2] >= '0' && path[2] <= '9') {
    auto slash = path.find('/', 1);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  auto segs = segments_of(path);
  if (segs.empty()) return "other";
  if (segs.size() == 1 && segs[0] == "version") return "version";
  if (segs.size() == 1 && segs[0] == "commit") return "container_commit";
  if (segs.size() == 1 && segs[0] == "events") return "events";
  std::string res(resource_of(segs[0]));
  if (res.empty()) return "other";
  const std::size_t n = segs.size();
  if (n >= 2 && segs[1] == "create" && method == verb::post) return res + (res == "image" ? "_pull" : "_create");
  if (method == verb::delete_) return res + "_remove";
  if (method == verb::get) {
    if (n == 1 || (n == 2 && segs[1] == "json")) return res + "_list";
    if (res == "container" && segs.back() == "stats") return "container_stats";
    return res + "_inspect";  // containers/{id}/json, images/{name…}/json, networks/{name}
  }
  if (method == verb::post && res == "container" && n == 3 && is_container_action(segs[2]))
    return res + "_" + std::string(segs[2]);
  return res + "_other";
}

}  // namespace sandfort::docker::detail
