#include "claim/routes.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "process/exec_json.hpp"

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

bool claimed = false;

// mkdir -p, as Docker does for a container's WorkingDir.
result<void> make_directories(const std::string& path) {
  for (std::size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string prefix = path.substr(0, at);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return make_error(errc::invalid_argument, "cannot create workdir " + prefix + ": " + std::strerror(errno));
  }
  return {};
}

result<void> apply(const json& j) {
  std::map<std::string, std::string> env;
  if (j.contains("env")) {
    auto parsed = parse_env(j["env"]);
    if (!parsed) return std::move(parsed).err();
    env = std::move(*parsed);
  }
  std::string workdir;
  if (j.contains("workdir")) {
    if (!j["workdir"].is_string()) return make_error(errc::invalid_argument, "workdir must be a string");
    workdir = j["workdir"].get<std::string>();
    if (!workdir.empty() && (workdir.front() != '/' || workdir.find('\0') != std::string::npos))
      return make_error(errc::invalid_argument, "workdir must be an absolute path");
  }
  for (const auto& [key, value] : env)
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos ||
        value.find('\0') != std::string::npos)
      return make_error(errc::invalid_argument, "env entry '" + key + "' is not a valid variable");
  if (!workdir.empty()) {
    if (auto r = make_directories(workdir); !r) return r;
    if (::chdir(workdir.c_str()) != 0)
      return make_error(errc::invalid_argument, "cannot enter workdir " + workdir + ": " + std::strerror(errno));
  }
  // The agent is single-threaded: nothing reads environ while it changes.
  for (const auto& [key, value] : env) ::setenv(key.c_str(), value.c_str(), 1);
  return {};
}

asio::awaitable<http::response> claim_sandbox(http::context& ctx) {
  if (claimed) co_return http::error_response(make_error(errc::conflict, "this sandbox is already claimed"), ctx.request_id);
  auto body = parse_object(ctx.req.body());
  if (!body) co_return http::error_response(body.err(), ctx.request_id);
  if (auto known = check_fields(*body, {"env", "workdir"}); !known)
    co_return http::error_response(known.err(), ctx.request_id);
  if (auto r = apply(*body); !r) co_return http::error_response(r.err(), ctx.request_id);
  claimed = true;
  co_return http::json_response(200, {{"status", "claimed"}});
}

}  // namespace

namespace claim {

std::vector<http::route> routes() { return {{http::verb::post, "/claim", &claim_sandbox}}; }

}  // namespace claim

}  // namespace sandfort::agent
