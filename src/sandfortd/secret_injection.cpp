#include "secret_injection.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "sandfort/secrets/interception_ca.hpp"
#include "sandfort/secrets/placement_json.hpp"
#include "sandfort/store/secret_store.hpp"

namespace sandfort::daemon {

std::optional<proxy::injected_secret> open_secret(store::database& db, const secrets::sealing_key& key,
                                                  const std::string& org_id, const std::string& name) {
  auto row = store::secret_store(db).get(org_id, name);
  if (!row) return std::nullopt;
  auto value = key.open(row->sealed_value, secrets::value_aad(org_id, name));
  if (!value) {
    spdlog::warn("secrets: the value of {} in {} does not open: {}", name, org_id, value.err().message);
    return std::nullopt;
  }
  proxy::injected_secret s;
  s.name = name;
  auto hosts = nlohmann::json::parse(row->hosts_json, nullptr, false);
  if (hosts.is_array())
    for (const auto& h : hosts)
      if (h.is_string()) s.hosts.push_back(h.get<std::string>());
  s.placement = secrets::placement_from_json(nlohmann::json::parse(row->placement_json, nullptr, false));
  s.value = std::move(*value);
  return s;
}

std::optional<proxy::interception_authority> interception_authorities::authority(const std::string& org_id) {
  auto stored = store::secret_store(db_).interception_ca(org_id);
  if (!stored || !*stored) return std::nullopt;
  const auto& record = **stored;
  std::lock_guard lock(mutex_);
  if (auto it = cache_.find(org_id); it != cache_.end() && it->second.certificate_pem == record.certificate_pem)
    return it->second.authority;
  auto key_pem = key_.open(record.sealed_key, secrets::ca_key_aad(org_id));
  if (!key_pem) {
    spdlog::warn("secrets: the interception CA key of {} does not open: {}", org_id, key_pem.err().message);
    return std::nullopt;
  }
  auto ca = secrets::interception_ca::from_pem(record.certificate_pem, *key_pem);
  std::fill(key_pem->begin(), key_pem->end(), '\0');
  if (!ca) {
    spdlog::warn("secrets: the interception CA of {} does not load: {}", org_id, ca.err().message);
    return std::nullopt;
  }
  auto shared = std::make_shared<const secrets::interception_ca>(std::move(*ca));
  proxy::interception_authority a{shared, std::make_shared<secrets::leaf_cache>(shared, leaves_per_org)};
  if (cache_.size() >= max_orgs) cache_.clear();
  cache_[org_id] = entry{record.certificate_pem, a};
  return a;
}

}  // namespace sandfort::daemon
