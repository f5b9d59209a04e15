#include "sandfort/sandbox/store_lookups.hpp"

#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

std::optional<proxy::sandbox_egress> egress_lookup::find(const std::string& sandbox_id) {
  auto rec = sandboxes_.find_live_sandbox(sandbox_id);
  // A row without a credential (made before the sandbox network existed) can never authenticate.
  if (!rec || rec->proxy_secret_sha256.empty()) return std::nullopt;
  // The state and address bind the credential to where the sandbox's container is now.
  auto spec = spec_from_json(rec->spec_json);
  proxy::sandbox_egress out{rec->id,         rec->org_id,  rec->proxy_secret_sha256,
                            std::move(spec.egress_allowlist), rec->state, rec->address,
                            std::move(spec.egress_deny),       std::move(spec.egress_rules)};
  if (secrets_)
    for (const auto& a : spec.secrets)
      if (auto s = secrets_(rec->org_id, a.name)) {
        s->placeholder = a.placeholder;
        out.secrets.push_back(std::move(*s));
      }
  return out;
}

std::optional<preview::preview_target> preview_lookup::find(const std::string& sandbox_id) {
  auto rec = sandboxes_.find_live_sandbox(sandbox_id);
  if (!rec) return std::nullopt;
  if (activity_) activity_->touch(rec->id);  // a preview request is use (the idle timeout)
  const auto spec = spec_from_json(rec->spec_json);
  return preview::preview_target{rec->id,          rec->state,      rec->address, spec.public_preview,
                                 rec->preview_key, spec.dials_home};
}

}  // namespace sandfort::sandbox
