#include "claim/routes.hpp"

#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "claim/workdir.hpp"
#include "process/exec_json.hpp"

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

bool claimed = false;

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
  if (!workdir.empty())
    if (auto r = claim::enter_workdir(workdir); !r) return r;
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
