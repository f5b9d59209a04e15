#include "org_lifecycle.hpp"

#include <spdlog/spdlog.h>

namespace sandfort::api {

namespace asio = boost::asio;
using asio::awaitable;

namespace {

result<store::org> find_org(dependencies& deps, const std::string& id_or_name) {
  auto o = deps.identity.find_org(id_or_name);
  if (o && o->state == "deleted") return make_error(errc::not_found, "organization " + id_or_name + " not found");
  if (o && o->superadmin) return make_error(errc::conflict, "the superadmin organization cannot be disabled or deleted");
  return o;
}

// Applies `act` to every sandbox of the organization; the first failure is returned after the
// rest were tried. Pages are read afresh each round, so removals do not shift the cursor.
awaitable<result<int>> for_each_sandbox(dependencies& deps, const audit::actor& who, const std::string& org_id,
                                        const std::string& state, bool removes,
                                        sandbox::task<void> (*act)(dependencies&, const audit::actor&,
                                                                   const std::string&, const std::string&)) {
  int done = 0;
  std::optional<error> first_failure;
  sandbox::list_request req;
  req.state = state;
  req.limit = 100;
  while (true) {
    auto page = co_await deps.sandboxes.list(org_id, req);
    if (!page) co_return std::move(page).err();
    for (const auto& s : page->items) {
      if (auto r = co_await act(deps, who, org_id, s.id); !r) {
        spdlog::warn("orgs: sandbox {} of {}: {}", s.id, org_id, r.err().message);
        if (!first_failure) first_failure = r.err();
      } else {
        ++done;
      }
    }
    if (page->next_cursor.empty()) break;
    // A removed sandbox leaves the list: the same first page holds the next ones, unless some failed.
    if (!removes || first_failure) req.cursor = page->next_cursor;
  }
  if (first_failure) co_return *first_failure;
  co_return done;
}

// Moves the organization to `state` from one of `from`, with its event, in one transaction.
result<void> change_state(dependencies& deps, const auth::principal& by, const audit::actor& who, const store::org& o,
                          const std::string& state, const std::vector<std::string>& from, audit::record r) {
  std::vector<std::string> chains{o.id};
  if (by.org_id != o.id) chains.push_back(by.org_id);
  return deps.identity.set_org_state(chains, who, o.id, state, from, r);
}

sandbox::task<void> stop_one(dependencies& deps, const audit::actor& who, const std::string& org_id,
                             const std::string& id) {
  auto r = co_await deps.sandboxes.change_state(sandbox_backend::change::stop, org_id, id, who);
  if (!r && r.err().code != errc::conflict && r.err().code != errc::not_found) co_return std::move(r).err();
  co_return ok_t{};
}

sandbox::task<void> remove_one(dependencies& deps, const audit::actor& who, const std::string& org_id,
                               const std::string& id) {
  auto r = co_await deps.sandboxes.remove(org_id, id, who);
  if (!r && r.err().code != errc::not_found) co_return std::move(r).err();
  co_return ok_t{};
}

// Deletes every volume (or snapshot) of the organization; the first failure is returned after
// the rest were tried.
template <typename View, typename Create, typename Page>
awaitable<result<int>> remove_all(named_resource_backend<View, Create, Page>& resources, const char* kind,
                                  const audit::actor& who, const std::string& org_id) {
  int done = 0;
  std::optional<error> first_failure;
  sandbox::name_page_request req;
  req.limit = 100;
  while (true) {
    auto page = resources.list(org_id, req);
    if (!page) co_return std::move(page).err();
    for (const auto& v : page->items) {
      auto r = co_await resources.remove(org_id, v.id, who);
      if (!r && r.err().code != errc::not_found) {
        spdlog::warn("orgs: {} {} of {}: {}", kind, v.id, org_id, r.err().message);
        if (!first_failure) first_failure = r.err();
      } else {
        ++done;
      }
    }
    if (page->next_cursor.empty()) break;
    req.cursor = page->next_cursor;  // names sort, so a page read afresh would start at the same place
  }
  if (first_failure) co_return *first_failure;
  co_return done;
}

}  // namespace

awaitable<result<store::org>> disable_org(dependencies& deps, const auth::principal& by, const audit::actor& who,
                                          const std::string& id_or_name) {
  auto o = find_org(deps, id_or_name);
  if (!o) co_return o;
  if (o->state == "active") {
    if (auto r = change_state(deps, by, who, *o, "disabled", {"active"}, {"org.disable", o->id}); !r) co_return r.err();
  } else if (o->state != "disabled") {
    co_return make_error(errc::conflict, "organization " + o->name + " is " + o->state);
  }
  // Paused ones too: frozen, they still hold their memory, and nobody of a disabled organization
  // could resume or stop them.
  int stopped = 0;
  for (const char* state : {"started", "paused"}) {
    auto n = co_await for_each_sandbox(deps, who, o->id, state, false, &stop_one);
    if (!n) co_return std::move(n).err();
    stopped += *n;
  }
  spdlog::info("orgs: {} ({}) disabled; {} sandbox(es) stopped", o->name, o->id, stopped);
  co_return deps.identity.find_org(o->id);
}

awaitable<result<store::org>> enable_org(dependencies& deps, const auth::principal& by, const audit::actor& who,
                                         const std::string& id_or_name) {
  auto o = find_org(deps, id_or_name);
  if (!o) co_return o;
  if (o->state != "active") {
    if (auto r = change_state(deps, by, who, *o, "active", {"disabled"}, {"org.enable", o->id}); !r) co_return r.err();
    spdlog::info("orgs: {} ({}) enabled", o->name, o->id);
  }
  co_return deps.identity.find_org(o->id);
}

awaitable<result<void>> delete_org(dependencies& deps, const auth::principal& by, const audit::actor& who,
                                   const std::string& id_or_name) {
  auto o = find_org(deps, id_or_name);
  if (!o) co_return std::move(o).err();
  if (o->state != "deleting")
    if (auto r = change_state(deps, by, who, *o, "deleting", {"active", "disabled"}, {"org.delete", o->id, "started"}); !r)
      co_return r;
  // From here on nothing of it authenticates; what is left is cleaning up.
  auto revoked = deps.identity.revoke_org_keys(o->id, who);
  if (!revoked) co_return std::move(revoked).err();
  auto removed = co_await for_each_sandbox(deps, who, o->id, "", true, &remove_one);
  if (!removed) co_return std::move(removed).err();
  // Volumes after sandboxes: none is mounted any more. A failure leaves the organization
  // `deleting`, and a second DELETE finishes.
  auto volumes = co_await remove_all(deps.volumes, "volume", who, o->id);
  if (!volumes) co_return std::move(volumes).err();
  // Snapshots likewise: no sandbox runs from one any more.
  auto snapshots = co_await remove_all(deps.snapshots, "snapshot", who, o->id);
  if (!snapshots) co_return std::move(snapshots).err();
  // Its secrets and interception CA: nothing will use them again.
  auto secrets = deps.secrets.remove_all(o->id, who);
  if (!secrets) co_return std::move(secrets).err();
  // Its webhooks and their delivery logs: an organization that is gone tells nobody any more
  // (events of the deletion not delivered by now never will be; docs/events.md).
  auto webhooks = deps.webhooks.remove_all(o->id, who);
  if (!webhooks) co_return std::move(webhooks).err();
  // The organization's last event closes its chain.
  if (auto r = change_state(deps, by, who, *o, "deleted", {"deleting"},
                            {"org.delete", o->id, "ok",
                             {{"chain", "closed"}, {"sandboxes_removed", *removed}, {"volumes_removed", *volumes},
                              {"snapshots_removed", *snapshots}, {"secrets_removed", *secrets},
                              {"webhooks_removed", *webhooks}}});
      !r)
    co_return r;
  spdlog::info("orgs: {} ({}) deleted: {} key(s) revoked, {} sandbox(es) and {} volume(s) removed", o->name, o->id,
               *revoked, *removed, *volumes);
  co_return ok_t{};
}

}  // namespace sandfort::api
