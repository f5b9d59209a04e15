#include "sandfort/http/router.hpp"

#include <string_view>

namespace sandfort::http {
namespace {

std::vector<std::string_view> segments(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    auto slash = s.find('/', start);
    if (slash == std::string_view::npos) slash = s.size();
    if (slash > start) out.push_back(s.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

}  // namespace

bool match_pattern(const std::string& pattern, const std::string& path, std::map<std::string, std::string>& params) {
  auto want = segments(pattern);
  auto have = segments(path);
  if (want.size() != have.size()) return false;
  std::map<std::string, std::string> captured;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i].size() > 2 && want[i].front() == '{' && want[i].back() == '}') {
      captured[std::string(want[i].substr(1, want[i].size() - 2))] = percent_decode(have[i]);
    } else if (want[i] != have[i]) {
      return false;
    }
  }
  params = std::move(captured);
  return true;
}

void router::add(route r) { routes_.push_back(std::move(r)); }

void router::add(std::vector<route> routes) {
  for (auto& r : routes) routes_.push_back(std::move(r));
}

router::match_result router::match(verb method, const std::string& path,
                                   std::map<std::string, std::string>& params) const {
  match_result out;
  for (const auto& r : routes_) {
    std::map<std::string, std::string> p;
    if (!match_pattern(r.pattern, path, p)) continue;
    if (r.method == method) {
      params = std::move(p);
      out.found = &r;
      return out;
    }
    out.status = 405;
  }
  return out;
}

boost::asio::awaitable<response> router::dispatch(context& ctx) const {
  auto m = match(ctx.req.method(), ctx.path, ctx.params);
  if (!m.found) {
    if (m.status == 405) {
      auto res = error_response(make_error(errc::invalid_argument, "method not allowed on " + ctx.path), ctx.request_id);
      res.result(bhttp::status::method_not_allowed);
      co_return res;
    }
    co_return error_response(make_error(errc::not_found, "no route for " + ctx.path), ctx.request_id);
  }
  co_return co_await m.found->fn(ctx);
}

}  // namespace sandfort::http
