// The route registry and its one guard, table-driven over every route the API serves: a caller
// below a route's declared permission is refused (403) and one at it passes. The guard runs for
// real (its rate limiter too) over fakes of the backends it asks (fake_backends.hpp): the gate
// that authenticates takes "Bearer <role>" for a key of that role.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "fake_backends.hpp"
#include "routes.hpp"
#include "support/run_coroutine.hpp"

namespace {

using namespace sandfort;
using api::api_route;
using api::route_kind;

// The roles in order; a permission's rank is the least role that holds it (docs/api.md, "Roles,
// route by route"). Written out here, not derived from auth::allows, so that the two can disagree.
const std::map<std::string, int> caller_rank = {{"viewer", 1}, {"member", 2}, {"admin", 3}, {"superadmin", 4}};
int rank_of(auth::permission p) {
  switch (p) {
    case auth::permission::read: return 1;
    case auth::permission::use_sandboxes: return 2;
    case auth::permission::manage_org: return 3;
    case auth::permission::superadmin: return 4;
  }
  return 99;
}

struct guard_fixture {
  api::test::fake_backends b;
  http::bhttp::fields no_headers;
  result<auth::principal> guard(const api_route& r, const std::string& authorization) {
    return testing::run_coroutine(api::guard(b.deps, r, authorization, no_headers, "req-guard-test", "198.51.100.7"));
  }
};

}  // namespace

TEST_CASE("route registry: one entry per method and pattern, each with its handler and permission",
          "[api][routes]") {
  const auto routes = api::route_registry();
  REQUIRE(routes.size() >= 60);
  std::set<std::pair<http::verb, std::string>> seen;
  for (const auto& r : routes) {
    INFO(std::string(http::bhttp::to_string(r.method)) << " " << r.pattern);
    CHECK(seen.insert({r.method, r.pattern}).second);
    CHECK(r.pattern.starts_with("/"));
    if (r.kind == route_kind::buffered) {
      CHECK(r.answer);
      CHECK_FALSE(r.stream);
    } else {
      CHECK(r.stream);
      CHECK_FALSE(r.answer);
      CHECK(r.needs);  // whatever streams is authenticated
    }
    // What reaches into a sandbox's agent is forwarded; only exec and code-run stream themselves,
    // and the organization's life-cycle events.
    CHECK((r.kind == route_kind::streamed) == (r.pattern.ends_with("/process/exec") ||
                                               r.pattern.ends_with("/process/code-run") || r.pattern == "/v1/events"));
  }
  // The declarations the role table leans on: a terminal acts though it is a GET; the operator's routes.
  auto needs = [&](http::verb m, const std::string& pattern) {
    for (const auto& r : routes)
      if (r.method == m && r.pattern == pattern) return r.needs;
    FAIL("no route " << pattern);
    return std::optional<auth::permission>();
  };
  CHECK(needs(http::verb::get, "/v1/sandboxes/{id}/pty") == auth::permission::use_sandboxes);
  CHECK(needs(http::verb::get, "/v1/sandboxes/{id}/files") == auth::permission::read);
  CHECK(needs(http::verb::post, "/v1/sandboxes/{id}/process/code-run") == auth::permission::use_sandboxes);
  CHECK(needs(http::verb::post, "/v1/sandboxes/{id}/code/run") == auth::permission::use_sandboxes);
  CHECK(needs(http::verb::get, "/v1/sandboxes/{id}/code/contexts") == auth::permission::read);
  CHECK(needs(http::verb::post, "/v1/sandboxes/{id}/code/contexts/{ctx}/restart") == auth::permission::use_sandboxes);
  CHECK(needs(http::verb::get, "/metrics") == auth::permission::superadmin);
  CHECK(needs(http::verb::get, "/healthz") == std::nullopt);
}

TEST_CASE("the guard: below a route's declared permission 403, at or above it through", "[api][routes][guard]") {
  guard_fixture g;
  int refused = 0, passed = 0;
  for (const auto& r : api::route_registry()) {
    INFO(std::string(http::bhttp::to_string(r.method)) << " " << r.pattern);
    if (!r.needs) {
      auto anyone = g.guard(r, "");
      REQUIRE(anyone);
      CHECK(anyone->org_id.empty());
      continue;
    }
    auto nobody = g.guard(r, "");
    REQUIRE_FALSE(nobody);
    CHECK(http_status(nobody.err().code) == 401);
    for (const auto& [caller, rank] : caller_rank) {
      INFO("caller " << caller);
      auto who = g.guard(r, "Bearer " + caller);
      if (rank >= rank_of(*r.needs)) {
        REQUIRE(who);
        if (caller != "superadmin") CHECK(who->org_id == api::test::org_a);
        ++passed;
      } else {
        REQUIRE_FALSE(who);
        CHECK(who.err().code == errc::permission_denied);
        CHECK(http_status(who.err().code) == 403);
        CHECK(who.err().message == "role " + caller + " may not do this");
        ++refused;
      }
    }
  }
  CHECK(refused >= 50);
  CHECK(passed >= 150);
  // Every 401 was counted for the audit chain's auth.failures, by client address.
  std::size_t failures = 0;
  for (const auto& c : g.b.w.calls)
    if (c.what == "gate.auth_failure") {
      CHECK(c.target == "198.51.100.7");
      ++failures;
    }
  CHECK(failures > 50);
}

TEST_CASE("describe_routes: what `sandfortd routes --json` prints", "[api][routes]") {
  const auto described = api::describe_routes();
  REQUIRE(described.size() == api::route_registry().size());
  bool pty = false, healthz = false;
  for (const auto& r : described) {
    CHECK(r.size() == 5);
    if (r["pattern"] == "/v1/sandboxes/{id}/pty") {
      pty = true;
      CHECK(r == nlohmann::json{{"method", "GET"}, {"pattern", "/v1/sandboxes/{id}/pty"},
                                {"permission", "use_sandboxes"}, {"role", "member"}, {"kind", "forwarded"}});
    }
    if (r["pattern"] == "/healthz") {
      healthz = true;
      CHECK(r["permission"].is_null());
      CHECK(r["role"] == "none");
      CHECK(r["kind"] == "buffered");
    }
    if (r["permission"] == "superadmin") CHECK(r["role"] == "superadmin");
    if (r["permission"] == "manage_org") CHECK(r["role"] == "admin");
    if (r["permission"] == "read") CHECK(r["role"] == "viewer");
  }
  CHECK(pty);
  CHECK(healthz);
}

TEST_CASE("resolve_target_org: the caller's own, or any one for the superadmin, deleted as each use says",
          "[api][routes][orgs]") {
  const std::map<std::string, api::named_org> orgs = {
      {"org-1111111111111111", {"org-1111111111111111", false}}, {"other", {"org-1111111111111111", false}},
      {"org-2222222222222222", {"org-2222222222222222", true}},  {"gone", {"org-2222222222222222", true}}};
  int lookups = 0;
  const api::org_lookup find = [&](const std::string& id_or_name) -> result<api::named_org> {
    ++lookups;
    auto it = orgs.find(id_or_name);
    if (it == orgs.end()) return make_error(errc::not_found, "organization " + id_or_name + " not found");
    return it->second;
  };
  auth::principal member;
  member.org_id = "org-0000000000000000";
  member.org_name = "mine";
  auth::principal operator_ = member;
  operator_.superadmin = true;
  using api::deleted_orgs;
  for (auto deleted : {deleted_orgs::refused, deleted_orgs::allowed}) {
    lookups = 0;
    for (const auto* p : {&member, &operator_}) {
      // Naming none, or its own by id or name: its own, without a lookup.
      for (const std::string own : {"", "org-0000000000000000", "mine"})
        CHECK(api::resolve_target_org(find, *p, own, deleted).value() == "org-0000000000000000");
    }
    CHECK(lookups == 0);
    // Another organization is not_found to everyone but the superadmin, existing or not.
    for (const std::string other : {"other", "org-1111111111111111", "gone", "nowhere"}) {
      auto r = api::resolve_target_org(find, member, other, deleted);
      REQUIRE_FALSE(r);
      CHECK(r.err().code == errc::not_found);
      CHECK(r.err().message == "organization " + other + " not found");
    }
    CHECK(lookups == 0);
    CHECK(api::resolve_target_org(find, operator_, "other", deleted).value() == "org-1111111111111111");
    CHECK(api::resolve_target_org(find, operator_, "org-1111111111111111", deleted).value() == "org-1111111111111111");
    CHECK(api::resolve_target_org(find, operator_, "nowhere", deleted).err().code == errc::not_found);
  }
  // A deleted organization: its audit chain may be read (allowed), its limits not acted on (refused).
  CHECK(api::resolve_target_org(find, operator_, "gone", deleted_orgs::allowed).value() == "org-2222222222222222");
  auto refused = api::resolve_target_org(find, operator_, "gone", deleted_orgs::refused);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::not_found);
  CHECK(refused.err().message == "organization gone not found");
}
