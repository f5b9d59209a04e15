#include "ports/routes.hpp"

#include <nlohmann/json.hpp>

#include "ports/listening.hpp"

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

json to_json(const ports::listening_port& p) {
  return {{"port", p.port},
          {"address", p.address},
          {"protocol", "tcp"},
          {"family", p.ipv6 ? "ipv6" : "ipv4"},
          {"pid", p.pid ? json(*p.pid) : json(nullptr)},
          {"process", p.process ? json(*p.process) : json(nullptr)}};
}

asio::awaitable<http::response> list_ports(http::context&) {
  json items = json::array();
  for (const auto& p : ports::listening_tcp_ports()) items.push_back(to_json(p));
  co_return http::json_response(200, {{"items", std::move(items)}});
}

}  // namespace

namespace ports {

std::vector<http::route> routes() { return {{http::verb::get, "/ports", &list_ports}}; }

}  // namespace ports

}  // namespace sandfort::agent
