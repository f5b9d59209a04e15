// Which organization a request acts on when it names one (resolve_target_org, routes.hpp).
#include "routes.hpp"

namespace sandfort::api {

result<std::string> resolve_target_org(const org_lookup& find, const auth::principal& p, const std::string& named,
                                       deleted_orgs deleted) {
  if (named.empty() || named == p.org_id || named == p.org_name) return p.org_id;
  const auto not_found = [&] { return make_error(errc::not_found, "organization " + named + " not found"); };
  if (!p.superadmin) return not_found();
  auto o = find(named);
  if (!o) return std::move(o).err();
  if (o->deleted && deleted == deleted_orgs::refused) return not_found();
  return o->id;
}

result<std::string> resolve_target_org(dependencies& deps, const auth::principal& p, const std::string& named,
                                       deleted_orgs deleted) {
  const org_lookup find = [&deps](const std::string& id_or_name) -> result<named_org> {
    auto o = deps.identity.find_org(id_or_name);
    if (!o) return std::move(o).err();
    return named_org{o->id, o->state == "deleted"};
  };
  return resolve_target_org(find, p, named, deleted);
}

}  // namespace sandfort::api
