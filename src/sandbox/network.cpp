// The network side of sandboxes (network.hpp).
#include <spdlog/spdlog.h>

#include <charconv>

#include "sandfort/preview/address.hpp"
#include "sandfort/sandbox/network.hpp"

#include "sandfort/docker/messages.hpp"
#include "sandfort/sandbox/commands.hpp"  // find_started
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace {

std::string replace_all(std::string text, std::string_view what, std::string_view with) {
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size()))
    text.replace(at, what.size(), with);
  return text;
}

unsigned short listen_port(const std::string& host_port) {
  auto text = host_port.substr(host_port.rfind(':') + 1);
  unsigned short port = 0;
  std::from_chars(text.data(), text.data() + text.size(), port);
  return port;
}

// Docker's embedded DNS server listens inside every container on a user-defined network, on
// 127.0.0.11 (a random TCP port): Docker's listener, not the sandbox's, and never a preview.
bool docker_resolver(std::string_view address) {
  return address == "127.0.0.11" || address == "::ffff:127.0.0.11";
}

// The preview router dials the container's IPv4 address on the sandbox network: a listener on a
// wildcard address or on that address answers it; one on loopback (or any other address) does not.
// A sandbox that dials home has no such address: its agent dials its loopback (127.0.0.1, then
// ::1), which a listener on a wildcard or a loopback address answers.
bool reachable_by_preview(std::string_view listener, const agent_address& at, const std::string& container_address) {
  if (listener == "0.0.0.0" || listener == "::" || listener == "::ffff:0.0.0.0") return true;
  if (at.dials_home) return listener == "127.0.0.1" || listener == "::ffff:127.0.0.1" || listener == "::1";
  if (container_address.empty()) return false;
  return listener == container_address || listener == "::ffff:" + container_address;
}

}  // namespace

network_service::network_service(const config& cfg, store::database& db, docker::engine& engine,
                                 agent_connector& agent, activity_tracker& activity)
    : cfg_(cfg), db_(db), sandboxes_(db), engine_(engine), agent_(agent), activity_(activity) {}

task<docker::network_info> network_service::prepare() {
  const auto& want = cfg_.network;
  auto gateway = docker::first_host_address(want.subnet);
  if (!gateway) co_return std::move(gateway).err();
  auto found = co_await engine_.inspect_network(want.name);
  if (!found && found.err().code == errc::not_found) {
    docker::network_spec spec{want.name, want.subnet, *gateway, want.bridge,
                              {{label_network, "1"}, {label_instance, db_.instance_id()}}};
    found = co_await engine_.create_network(spec);
    if (!found && found.err().code == errc::conflict) found = co_await engine_.inspect_network(want.name);
    if (found) spdlog::info("created the sandbox network {} ({}, bridge {})", want.name, want.subnet, want.bridge);
  }
  if (!found) co_return std::move(found).err();
  const auto& net = *found;
  std::string fix = ": remove it (docker network rm " + want.name + ") or set network.name to another name";
  if (!net.labels.count(label_network))
    co_return make_error(errc::conflict, "a Docker network named " + want.name + " exists but sandfortd did not create it" + fix);
  if (!net.internal || net.inter_container)
    co_return make_error(errc::conflict, "the Docker network " + want.name +
                                             " is not internal or lets containers reach each other" + fix);
  if (net.subnet.empty() || net.gateway.empty())
    co_return make_error(errc::conflict, "the Docker network " + want.name + " has no IPv4 subnet" + fix);
  if (net.subnet != want.subnet || net.bridge != want.bridge)
    spdlog::warn("the sandbox network {} already exists with subnet {} and bridge {} (configured: {}, {}); using it as it is",
                 want.name, net.subnet, net.bridge, want.subnet, want.bridge);
  network_ = net;
  co_return net;
}

task<void> network_service::refresh_address(store::sandbox_record& rec) {
  auto info = co_await engine_.inspect_container(rec.container_id);
  if (!info) co_return std::move(info).err();
  auto it = network_ ? info->addresses.find(network_->name) : info->addresses.end();
  rec.address = it == info->addresses.end() ? std::string{} : it->second;
  co_return ok_t{};
}

void network_service::disconnect(const std::string& sandbox_id) {
  for (auto& hook : hooks_) hook(sandbox_id);
}

std::string network_service::preview_url_template(const std::string& sandbox_id) const {
  const std::string& configured = cfg_.preview.url_template;
  if (!configured.empty()) return replace_all(configured, "{id}", sandbox_id);
  const unsigned short port = listen_port(cfg_.preview.listen);
  std::string url = preview::url_template(cfg_.preview.domain, sandbox_id, port);
  // sandfortd's own TLS front serves previews too (src/sandfortd/main.cpp).
  if (cfg_.tls.enabled()) {
    url.replace(0, 4, "https");
    if (port == 443) url.erase(url.size() - 4);
  }
  return url;
}

result<preview_link> network_service::preview(const std::string& org_id, const std::string& id_or_name, int port) {
  if (port < 1 || port > 65535) return make_error(errc::invalid_argument, "port must be between 1 and 65535");
  auto rec = sandboxes_.get_sandbox(org_id, id_or_name);
  if (!rec) return std::move(rec).err();
  preview_link link;
  link.url = replace_all(preview_url_template(rec->id), "{port}", std::to_string(port));
  if (!spec_from_json(rec->spec_json).public_preview)
    link.token = preview::make_token(rec->preview_key, rec->id, static_cast<unsigned short>(port));
  link.link = preview::link_for(link.url, link.token);
  return link;
}

task<std::vector<listening_port>> network_service::ports(const std::string& org_id, const std::string& id_or_name) {
  auto rec = find_started(sandboxes_, activity_, org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  const agent_address at = agent_address_of(*rec);
  auto found = co_await agent_.ports(at);
  if (!found) co_return std::move(found).err();
  std::string tmpl = preview_url_template(rec->id);
  std::vector<listening_port> listed;
  for (auto& p : *found) {
    if (docker_resolver(p.address)) continue;
    p.url = replace_all(tmpl, "{port}", std::to_string(p.port));
    p.previewable = reachable_by_preview(p.address, at, rec->address);
    listed.push_back(std::move(p));
  }
  co_return std::move(listed);
}

}  // namespace sandfort::sandbox
