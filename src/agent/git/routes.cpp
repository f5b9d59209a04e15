#include "git/routes.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "git/credentials.hpp"
#include "git/porcelain.hpp"
#include "git/request.hpp"
#include "git/run.hpp"
#include "process/exec_json.hpp"
#include "session/session.hpp"

namespace sandfort::agent::git {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

// The repository of every operation but clone must be a directory that exists.
result<void> check_repository(const request& req) {
  if (req.operation == op::clone) return {};
  struct stat st {};
  if (::stat(req.path.c_str(), &st) != 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR)
      return make_error(errc::invalid_argument, "path '" + req.path + "' does not exist");
    return make_error(errc::invalid_argument, "path '" + req.path + "' is not accessible: " + errno_text(e));
  }
  if (!S_ISDIR(st.st_mode)) return make_error(errc::invalid_argument, "path '" + req.path + "' is not a directory");
  return {};
}

asio::awaitable<http::response> handle(http::context& ctx) {
  auto which = parse_op(ctx.params["op"]);
  if (!which)
    co_return http::error_response(
        make_error(errc::not_found, "no git operation '" + ctx.params["op"] +
                                        "' (clone, pull, push, add, commit, checkout, branches, status)"),
        ctx.request_id);
  auto req = parse_request(*which, ctx.req.body());
  if (!req) co_return http::error_response(req.err(), ctx.request_id);
  if (auto there = check_repository(*req); !there) co_return http::error_response(there.err(), ctx.request_id);

  const auto& limits = sessions::current_limits();
  run_options options;
  options.timeout = limits.max_timeout;
  if (req->timeout) options.timeout = std::min<std::chrono::milliseconds>(*req->timeout, limits.max_timeout);
  options.max_output_bytes = limits.output_cap;

  auto cmd = build_command(*req, self_path());
  auto done = co_await run_git(cmd, req->creds, options);
  // The secret is not needed any more: do not keep it around until the answer is written.
  if (req->creds) std::fill(req->creds->password.begin(), req->creds->password.end(), '\0');
  if (!done) co_return http::error_response(done.err(), ctx.request_id);

  json body = to_json(*done, false);
  body["op"] = std::string(to_string(req->operation));
  const bool succeeded = done->exit_code == 0 && !done->timed_out;
  if (succeeded && req->operation == op::status) body.update(to_json(parse_status(done->stdout_data)));
  if (succeeded && req->operation == op::branches) body.update(branches_json(parse_branches(done->stdout_data)));
  co_return http::json_response(200, body);
}

}  // namespace

std::vector<http::route> routes() {
  self_path();  // resolved now, while /proc/self/exe is surely the agent
  return {{http::verb::post, "/git/{op}", &handle}};
}

}  // namespace sandfort::agent::git
