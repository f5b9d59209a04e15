// The network side of sandboxes: the bridge they live on, their addresses on it, preview links
// and egress settings that change while they run.
#include <spdlog/spdlog.h>

#include <charconv>

#include "sandfort/preview/address.hpp"
#include "sandfort/sandbox/service.hpp"

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

}  // namespace

task<docker::network_info> service::prepare_network() {
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

task<void> service::refresh_address(store::sandbox_record& rec) {
  auto info = co_await engine_.inspect_container(rec.container_id);
  if (!info) co_return std::move(info).err();
  auto it = network_ ? info->addresses.find(network_->name) : info->addresses.end();
  rec.address = it == info->addresses.end() ? std::string{} : it->second;
  co_return ok_t{};
}

void service::disconnect(const std::string& sandbox_id) {
  agent_.forget(sandbox_id);
  for (auto& hook : disconnect_hooks_) hook(sandbox_id);
}

sandbox_view service::view_of(const store::sandbox_record& rec) const {
  auto v = to_view(rec);
  const std::string& configured = cfg_.preview.url_template;
  v.preview_url_template = configured.empty()
                               ? preview::url_template(cfg_.preview.domain, rec.id, listen_port(cfg_.preview.listen))
                               : replace_all(configured, "{id}", rec.id);
  return v;
}

result<preview_link> service::preview(const std::string& org_id, const std::string& id_or_name, int port) {
  if (port < 1 || port > 65535) return make_error(errc::invalid_argument, "port must be between 1 and 65535");
  auto rec = db_.get_sandbox(org_id, id_or_name);
  if (!rec) return std::move(rec).err();
  auto view = view_of(*rec);
  preview_link link;
  link.url = replace_all(view.preview_url_template, "{port}", std::to_string(port));
  if (!view.spec.public_preview)
    link.token = preview::make_token(rec->preview_key, rec->id, static_cast<unsigned short>(port));
  return link;
}

task<sandbox_metrics> service::metrics(const std::string& org_id, const std::string& id_or_name) {
  auto rec = require_started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  std::string id = rec->id;
  auto sample = co_await engine_.stats(rec->container_id);
  if (!sample) co_return std::move(sample).err();
  sandbox_metrics m{sample->cpu_percent, sample->memory_bytes, sample->memory_limit_bytes, sample->pids};
  if (egress_meter_) {
    auto t = egress_meter_(id);
    m.egress_bytes_in = t.bytes_in;
    m.egress_bytes_out = t.bytes_out;
    m.egress_allowed = t.allowed;
    m.egress_denied = t.denied;
  }
  co_return m;
}

task<std::vector<listening_port>> service::ports(const std::string& org_id, const std::string& id_or_name) {
  auto rec = require_started(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  auto found = co_await agent_.ports(agent_address_of(*rec));
  if (!found) co_return std::move(found).err();
  std::string tmpl = view_of(*rec).preview_url_template;
  for (auto& p : *found) {
    p.url = replace_all(tmpl, "{port}", std::to_string(p.port));
    p.previewable = p.address != "127.0.0.1" && p.address != "::1";
  }
  co_return std::move(found).value();
}

task<sandbox_view> service::update(const std::string& org_id, const std::string& id_or_name, const update_request& req,
                                     const audit::actor& who) {
  auto rec = db_.get_sandbox(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  auto spec = spec_from_json(rec->spec_json);
  if (req.egress_allowlist) {
    if (auto r = validate_allowlist(*req.egress_allowlist); !r) co_return std::move(r).err();
    spec.egress_allowlist = *req.egress_allowlist;
  }
  if (req.labels) {
    create_request probe;  // the same label rules as at creation
    probe.labels = *req.labels;
    if (auto r = validate(probe); !r) co_return std::move(r).err();
    spec.labels = *req.labels;
  }
  if (req.idle_timeout_s) {
    if (auto r = check_idle_timeout(req.idle_timeout_s); !r) co_return std::move(r).err();
    spec.idle_timeout_s = *req.idle_timeout_s;
  }
  auto now = clock_.now();
  if (req.ttl_s) {
    if (*req.ttl_s <= 0 || *req.ttl_s > 30LL * 24 * 3600)
      co_return make_error(errc::invalid_argument, "ttl_s must be between 1 and 2592000 (30 days)");
    // A new TTL counts from now, as in E2B's set_timeout: "keep it alive for another hour".
    spec.ttl_s = *req.ttl_s;
    rec->expires_at = format_time(now + std::chrono::seconds(*req.ttl_s));
  }
  rec->spec_json = spec_to_json(spec);
  rec->updated_at = format_time(now);
  auto updated = journal_.record_change(
      {rec->org_id}, who, [&] { return db_.update_sandbox_spec(*rec); },
      [&] { return audit::record{"sandbox.update", rec->id, "ok", {{"spec", spec_for_audit(rec->spec_json)}}}; });
  if (!updated) co_return std::move(updated).err();
  spdlog::info("sandbox {} updated", rec->id);
  co_return view_of(*rec);
}

}  // namespace sandfort::sandbox
