// The warm pool's state, for the operator (docs/pool.md): organizations never see the pool.
#include "routes.hpp"

#include <cmath>

namespace sandfort::api {

using nlohmann::json;
using boost::asio::awaitable;

std::vector<api_route> pool_routes() {
  return {
      {http::verb::get, "/v1/pool", auth::permission::superadmin,
       [](dependencies& deps, http::context&, const auth::principal&) -> awaitable<http::response> {
         json pools = json::array();
         for (const auto& p : deps.daemon.pools())
           pools.push_back({{"image", p.image},
                            {"resources",
                             {{"cpus", p.resources.cpus},
                              {"memory_mb", p.resources.memory_mb},
                              {"pids", p.resources.pids},
                              {"disk_mb", p.disk_mb}}},
                            {"size", p.target},  // before pools learned, the only size there was
                            {"min_size", p.min_size},
                            {"max_size", p.max_size},
                            {"target", p.target},
                            {"reason", p.reason},
                            {"last_burst", p.last_burst ? json{{"creates", p.last_burst->creates},
                                                               {"age_s", std::round(p.last_burst_age_s * 10) / 10}}
                                                        : json(nullptr)},
                            {"ready", p.ready},
                            {"making", p.making},
                            {"filling", p.making > 0},
                            {"claims", p.claims},
                            {"misses", p.misses},
                            {"last_error", p.last_error.empty() ? json(nullptr) : json(p.last_error)}});
         co_return http::json_response(200, {{"pools", std::move(pools)}});
       }},
  };
}

}  // namespace sandfort::api
