#pragma once
// What the egress proxy needs to inject organization secrets (docs/secrets.md), from the store
// and the secrets key: a sandbox's secrets with their values opened (each request, so rotation
// and deletion apply to the next one), and each organization's interception CA with a cache of
// the leaves it minted (kept in memory; the CA's key is opened once per organization).

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "sandfort/proxy/proxy.hpp"
#include "sandfort/secrets/sealing.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::daemon {

// The organization's secret `name` as the proxy injects it (no placeholder: the sandbox's), or
// nullopt when it is gone or does not open (logged, never its value).
std::optional<proxy::injected_secret> open_secret(store::database& db, const secrets::sealing_key& key,
                                                  const std::string& org_id, const std::string& name);

class interception_authorities final : public proxy::interception_directory {
 public:
  interception_authorities(store::database& db, const secrets::sealing_key& key) : db_(db), key_(key) {}
  std::optional<proxy::interception_authority> authority(const std::string& org_id) override;

  static constexpr std::size_t leaves_per_org = 1024;  // as docs/secrets.md says
  static constexpr std::size_t max_orgs = 1024;  // beyond: the cache starts afresh

 private:
  store::database& db_;
  const secrets::sealing_key& key_;
  std::mutex mutex_;
  // By organization, with the certificate it was made from: an organization deleted and its id
  // never reused, but a CA replaced (deleted with its organization) is never served stale.
  struct entry {
    std::string certificate_pem;
    proxy::interception_authority authority;
  };
  std::map<std::string, entry> cache_;
};

}  // namespace sandfort::daemon
