// The sandbox network as Docker sees it: what we ask for and how we read it back.
#include <arpa/inet.h>

#include <charconv>

#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"

namespace sandfort::docker {

namespace {

using json = nlohmann::json;

constexpr const char* bridge_name_option = "com.docker.network.bridge.name";
constexpr const char* icc_option = "com.docker.network.bridge.enable_icc";

std::string string_at(const json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

}  // namespace

result<std::string> first_host_address(const std::string& subnet) {
  auto slash = subnet.find('/');
  int prefix = -1;
  if (slash != std::string::npos) {
    auto* end = subnet.data() + subnet.size();
    auto [p, ec] = std::from_chars(subnet.data() + slash + 1, end, prefix);
    if (ec != std::errc{} || p != end) prefix = -1;
  }
  in_addr addr{};
  if (slash == std::string::npos || prefix < 8 || prefix > 30 ||
      inet_pton(AF_INET, subnet.substr(0, slash).c_str(), &addr) != 1)
    return make_error(errc::invalid_argument,
                      "network subnet '" + subnet + "' must be an IPv4 CIDR between /8 and /30, like 10.213.0.0/16");
  std::uint32_t host_order = ntohl(addr.s_addr);
  std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
  if ((host_order & ~mask) != 0)
    return make_error(errc::invalid_argument, "network subnet '" + subnet + "' has host bits set");
  addr.s_addr = htonl((host_order & mask) + 1);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &addr, text, sizeof text);
  return std::string(text);
}

json to_network_body(const network_spec& spec) {
  return json{{"Name", spec.name},
              {"Driver", "bridge"},
              {"CheckDuplicate", true},
              // No route out: the egress proxy on the gateway is the only way to the world.
              {"Internal", true},
              {"Attachable", false},
              {"EnableIPv6", false},
              {"IPAM", {{"Driver", "default"}, {"Config", {{{"Subnet", spec.subnet}, {"Gateway", spec.gateway}}}}}},
              {"Options",
               {{bridge_name_option, spec.bridge},
                // Sandboxes never talk to each other.
                {icc_option, "false"},
                {"com.docker.network.bridge.enable_ip_masquerade", "false"}}},
              {"Labels", spec.labels}};
}

result<network_info> parse_network(const json& body) {
  if (!body.is_object()) return make_error(errc::internal, "Docker's network description is not a JSON object");
  network_info info;
  info.id = string_at(body, "Id");
  info.name = string_at(body, "Name");
  // Docker answers a boolean; anything else reads as "not internal", a network sandfortd refuses.
  // (json::value() threw on another type: found by fuzz_docker_responses.)
  auto internal = body.find("Internal");
  info.internal = internal != body.end() && internal->is_boolean() && internal->get<bool>();
  const json& options = body.contains("Options") ? body["Options"] : json::object();
  info.bridge = string_at(options, bridge_name_option);
  if (info.bridge.empty()) info.bridge = "br-" + info.id.substr(0, 12);
  info.inter_container = string_at(options, icc_option) != "false";
  if (body.contains("Labels") && body["Labels"].is_object())
    for (const auto& [k, v] : body["Labels"].items())
      if (v.is_string()) info.labels.emplace(k, v.get<std::string>());
  if (body.contains("IPAM") && body["IPAM"].contains("Config") && body["IPAM"]["Config"].is_array())
    for (const auto& entry : body["IPAM"]["Config"]) {
      std::string subnet = string_at(entry, "Subnet");
      if (subnet.empty() || subnet.find(':') != std::string::npos) continue;  // IPv4 only
      info.subnet = subnet;
      info.gateway = string_at(entry, "Gateway");
      break;
    }
  if (info.gateway.empty() && !info.subnet.empty()) {
    auto gw = first_host_address(info.subnet);  // Docker's own choice when none was given
    if (gw) info.gateway = *gw;
  }
  if (body.contains("Containers") && body["Containers"].is_object())
    for (const auto& [id, unused] : body["Containers"].items()) info.containers.push_back(id);
  return info;
}

}  // namespace sandfort::docker
