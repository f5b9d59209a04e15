// The API's handlers over fakes of its backends (fake_backends.hpp), through the real HTTP server,
// the registry and its guard: parse → call → serialize. Every route, as a caller of organization
// A naming organization B's resources, is refused and reaches the backends only with A; the main
// resources' routes call the backend with what the request said and answer in the documented shape.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "../http/support.hpp"
#include "fake_backends.hpp"
#include "routes.hpp"

namespace {

using namespace sandfort;
using api::test::org_a;
using api::test::org_b;
using nlohmann::json;

struct api_server {
  api::test::fake_backends b;
  http::test::running_server server{http::server_options{}, api::make_handler(b.deps)};

  api_server() {
    server.on_server_thread([this] { server.srv().set_stream_selector(api::make_stream_selector(b.deps)); });
  }

  // One request as `who` ("viewer", "member", "admin", "superadmin"; "" sends no credentials).
  // `headers`: more header lines, each ending in \r\n.
  testing::raw_response call(const std::string& method, const std::string& target, const std::string& who,
                             const std::string& body = "", const std::string& headers = "") {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" + headers;
    if (!who.empty()) req += "Authorization: Bearer " + who + "\r\n";
    if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH")
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    testing::raw_client c;
    REQUIRE(c.connect(server.port()) == 0);
    REQUIRE(c.send_all(req));
    auto res = c.read_response(std::chrono::seconds(10));
    REQUIRE(res);
    return *res;
  }
  // The calls the backends saw, read on the server's thread.
  std::vector<api::test::call> calls() {
    return server.on_server_thread([this] { return b.w.calls; });
  }
  void forget_calls() {
    server.on_server_thread([this] { b.w.calls.clear(); });
  }
  template <typename F>
  auto on_world(F f) {
    return server.on_server_thread([this, f] { return f(b.w); });
  }
};

std::set<std::string> keys_of(const json& j) {
  std::set<std::string> out;
  for (const auto& [k, unused] : j.items()) out.insert(k);
  return out;
}

const std::set<std::string> sandbox_fields = {
    "id",      "name",           "state",          "snapshot", "created_at", "updated_at",     "expires_at",
    "ttl_s",   "idle_timeout_s", "resources",      "egress_allowlist",       "egress_deny", "egress_rules", "labels",         "env_keys",
    "user",    "workdir",        "public_preview", "volumes",  "preview_url_template", "runtime", "secrets"};

// A route's pattern with every name filled in: organization B's resources wherever one is named.
std::string naming_org_b(const std::string& pattern) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size();) {
    if (pattern[i] != '{') {
      out += pattern[i++];
      continue;
    }
    auto end = pattern.find('}', i);
    const std::string name = pattern.substr(i + 1, end - i - 1);
    i = end + 1;
    if (name == "id") out += pattern.starts_with("/v1/api-keys") ? "key-b" : "sbx-b";
    else if (name == "org") out += org_b;
    else if (name == "name")
      out += pattern.starts_with("/v1/volumes")     ? "vol-b"
             : pattern.starts_with("/v1/snapshots") ? "snap-b"
             : pattern.starts_with("/v1/secrets")   ? "secret-b"
                                                    : "s1";
    else if (name == "webhook") out += "whk-b";
    else if (name == "port") out += "8080";
    else out += "x";  // {cmd}, {op}: within a sandbox already named
  }
  return out;
}

std::string body_for(const std::string& pattern) {
  if (pattern.ends_with("/process/exec")) return R"({"command":"true"})";
  if (pattern.ends_with("/process/code-run")) return R"({"language":"python","code":"1"})";
  if (pattern == "/v1/secrets") return R"({"name":"k","value":"v","hosts":["a.example"],"header":"X-Key"})";
  if (pattern == "/v1/secrets/{name}") return R"({"value":"v"})";
  if (pattern == "/v1/webhooks") return R"({"url":"https://hooks.example/in"})";
  if (pattern == "/v1/webhooks/{webhook}") return R"({"enabled":false})";
  return "{}";
}

}  // namespace

TEST_CASE("every route: a caller of one organization naming another's resource is refused, and only its own "
          "organization reaches the backends",
          "[api][handlers][orgs]") {
  api_server s;
  int named = 0, unnamed = 0;
  for (const auto& r : api::route_registry()) {
    // The console's session names no resource, and answers only a cookie (its own test below).
    if (!r.needs || r.pattern == "/v1/console/session") continue;
    const std::string method(http::bhttp::to_string(r.method));
    std::string target = naming_org_b(r.pattern);
    if (r.pattern.starts_with("/v1/audit") && r.pattern != "/v1/audit/public-key") target += "?org=" + org_b;
    const bool names_b = target != r.pattern && target.find("-b") != std::string::npos;
    // The least role of organization A that may call it; an organization's admin for the operator's routes.
    const std::string who = *r.needs == auth::permission::read            ? "viewer"
                            : *r.needs == auth::permission::use_sandboxes ? "member"
                                                                          : "admin";
    INFO(method << " " << target << " as " << who);
    s.forget_calls();
    // Forwarded routes get no body: refused before it is read, it would be left unread on the connection.
    const bool bodyless = r.kind == api::route_kind::forwarded || r.method == http::verb::get ||
                          r.method == http::verb::delete_;
    auto res = s.call(method, target, who, bodyless ? "" : body_for(r.pattern));
    if (*r.needs == auth::permission::superadmin) {
      CHECK(res.status == 403);
      CHECK(s.calls().empty());
      continue;
    }
    if (names_b) {
      ++named;
      CHECK(res.status == 404);
      CHECK(json::parse(res.body)["error"]["code"] == "not_found");
    } else {
      ++unnamed;
      CHECK(res.status < 400);
    }
    for (const auto& c : s.calls()) {
      INFO("backend call " << c.what << " for " << c.org_id << " on " << c.target);
      CHECK(c.org_id != org_b);
      if (!c.org_id.empty()) CHECK(c.org_id == org_a);
    }
  }
  CHECK(named >= 40);
  CHECK(unnamed >= 10);
}

TEST_CASE("the superadmin names another organization in {org}, a deleted one is not found", "[api][handlers][orgs]") {
  api_server s;
  auto limits = s.call("GET", "/v1/orgs/beta/limits", "superadmin");
  REQUIRE(limits.status == 200);
  CHECK(json::parse(limits.body)["org_id"] == org_b);
  s.on_world([](api::test::world& w) {
    w.orgs[2].state = "deleted";
    return 0;
  });
  CHECK(s.call("GET", "/v1/orgs/beta/limits", "superadmin").status == 404);
  // Its audit chain outlives it: the superadmin still reads it.
  auto events = s.call("GET", "/v1/audit?org=beta", "superadmin");
  CHECK(events.status == 200);
  CHECK(s.calls().back().what == "audit.events");
  CHECK(s.calls().back().org_id == org_b);
}

TEST_CASE("sandboxes: create, get, list and delete call the backend for the caller's organization",
          "[api][handlers][sandboxes]") {
  api_server s;
  SECTION("create") {
    auto res = s.call("POST", "/v1/sandboxes", "member",
                      R"({"name":"web","snapshot":"python:3.12","env":{"K":"V"},"resources":{"cpus":2},"labels":{"team":"a"}})");
    REQUIRE(res.status == 201);
    auto body = json::parse(res.body);
    CHECK(keys_of(body) == sandbox_fields);
    CHECK(body["id"] == "sbx-new");
    CHECK(body["env_keys"] == json::array({"SECRET"}));  // names only: values never leave
    CHECK(body["resources"] == json{{"cpus", 1}, {"memory_mb", 512}, {"pids", 256}, {"disk_mb", 1024}});
    auto calls = s.calls();
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].what == "sandboxes.create");
    CHECK(calls[0].org_id == org_a);
    CHECK(calls[0].actor == "key:key-member");
    auto req = s.on_world([](api::test::world& w) { return w.last_create; });
    CHECK(req.name == "web");
    CHECK(req.snapshot == "python:3.12");
    CHECK(req.env == std::map<std::string, std::string>{{"K", "V"}});
    CHECK(req.cpus == 2);
  }
  SECTION("a body that does not parse reaches no backend") {
    auto res = s.call("POST", "/v1/sandboxes", "member", R"({"resources":{"cpus":"two"}})");
    CHECK(res.status == 400);
    CHECK(json::parse(res.body)["error"]["code"] == "invalid_argument");
    CHECK(s.calls().empty());
  }
  SECTION("get, waiting for a state") {
    auto res = s.call("GET", "/v1/sandboxes/sbx-a?wait_for=started&timeout_s=3", "viewer");
    REQUIRE(res.status == 200);
    CHECK(keys_of(json::parse(res.body)) == sandbox_fields);
    auto calls = s.calls();
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].what == "sandboxes.get");
    CHECK(calls[0].org_id == org_a);
    CHECK(calls[0].target == "sbx-a");
    CHECK(calls[0].actor == "started");  // the fake notes wait_for there
  }
  SECTION("list with filters") {
    auto res = s.call("GET", "/v1/sandboxes?limit=5&state=started&label=team:a,tier:web", "viewer");
    REQUIRE(res.status == 200);
    auto body = json::parse(res.body);
    CHECK(keys_of(body) == std::set<std::string>{"items", "next_cursor"});
    REQUIRE(body["items"].size() == 1);
    CHECK(body["items"][0]["id"] == "sbx-a");
    CHECK(body["next_cursor"].is_null());
    auto req = s.on_world([](api::test::world& w) { return w.last_list; });
    CHECK(req.limit == 5);
    CHECK(req.state == "started");
    CHECK(req.labels == std::vector<std::pair<std::string, std::string>>{{"team", "a"}, {"tier", "web"}});
    CHECK(s.call("GET", "/v1/sandboxes?limit=0", "viewer").status == 400);
  }
  SECTION("delete") {
    auto res = s.call("DELETE", "/v1/sandboxes/sbx-a", "member");
    CHECK(res.status == 204);
    CHECK(res.body.empty());
    auto calls = s.calls();
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].what == "sandboxes.remove");
    CHECK(calls[0].org_id == org_a);
    CHECK(calls[0].target == "sbx-a");
    s.forget_calls();
    CHECK(s.call("DELETE", "/v1/sandboxes/sbx-a", "viewer").status == 403);
    CHECK(s.calls().empty());
  }
  SECTION("a state change") {
    auto res = s.call("POST", "/v1/sandboxes/sbx-a/pause", "member");
    REQUIRE(res.status == 200);
    CHECK(s.calls().at(0).what == "sandboxes.pause");
  }
}

TEST_CASE("exec: the command as sent, the result as the documented JSON object", "[api][handlers][exec]") {
  api_server s;
  s.on_world([](api::test::world& w) {
    w.next_exec.exit_code = 3;
    w.next_exec.stdout_text = "hi\n";
    w.next_exec.stderr_text = "oops";
    w.next_exec.duration_ms = 12;
    return 0;
  });
  auto res = s.call("POST", "/v1/sandboxes/sbx-a/process/exec", "member",
                    R"({"command":"echo hi","cwd":"/tmp","timeout_s":5,"env":{"A":"1"}})");
  REQUIRE(res.status == 200);
  CHECK(res.header("content-type") == "application/json");
  auto body = json::parse(res.body);
  CHECK(body == json{{"exit_code", 3},    {"stdout", "hi\n"},    {"stderr", "oops"},      {"duration_ms", 12},
                     {"timed_out", false}, {"truncated", false}, {"oom_killed", false}});
  auto calls = s.calls();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].what == "commands.exec");
  CHECK(calls[0].org_id == org_a);
  CHECK(calls[0].target == "sbx-a");
  CHECK(calls[0].actor == "key:key-member");
  auto req = s.on_world([](api::test::world& w) { return w.last_exec; });
  CHECK(req.command == "echo hi");
  CHECK(req.cwd == "/tmp");
  CHECK(req.timeout_s == 5);
  CHECK(req.env == std::map<std::string, std::string>{{"A", "1"}});
  // A viewer may read a sandbox, not run in it.
  s.forget_calls();
  CHECK(s.call("POST", "/v1/sandboxes/sbx-a/process/exec", "viewer", R"({"command":"true"})").status == 403);
  CHECK(s.calls().empty());
}

TEST_CASE("API keys: created in the caller's organization with the secret shown once, listed, revoked",
          "[api][handlers][keys]") {
  api_server s;
  auto res = s.call("POST", "/v1/api-keys", "admin", R"({"name":"ci","role":"viewer","expires_in_s":60})");
  REQUIRE(res.status == 201);
  auto body = json::parse(res.body);
  CHECK(keys_of(body) == std::set<std::string>{"id", "name", "role", "org_id", "created_at", "expires_at",
                                               "revoked_at", "last_used_at", "key"});
  CHECK(body["key"] == "sfk_secret");
  CHECK(body["org_id"] == org_a);
  CHECK(body["role"] == "viewer");
  auto calls = s.calls();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].what == "identity.issue_key");
  CHECK(calls[0].org_id == org_a);
  CHECK(calls[0].target == "ci/1/60");  // name, one chain (its own), expires_in_s
  CHECK(calls[0].actor == "key:key-admin");
  CHECK(s.on_world([](api::test::world& w) { return w.last_role; }) == auth::role::viewer);

  s.forget_calls();
  CHECK(s.call("POST", "/v1/api-keys", "admin", R"({"role":"owner"})").status == 400);
  CHECK(s.call("POST", "/v1/api-keys", "admin", R"({"expires_in_s":0})").status == 400);
  CHECK(s.call("POST", "/v1/api-keys", "member", R"({})").status == 403);
  CHECK(s.calls().empty());

  auto list = json::parse(s.call("GET", "/v1/api-keys", "admin").body);
  REQUIRE(list["items"].size() == 1);
  CHECK(list["items"][0]["id"] == "key-a");
  CHECK_FALSE(list["items"][0].contains("key"));
  CHECK(list["next_cursor"].is_null());

  CHECK(s.call("DELETE", "/v1/api-keys/key-a", "admin").status == 204);
  CHECK(s.calls().back().what == "identity.revoke_key");
  CHECK(s.calls().back().org_id == org_a);

  // The superadmin's key for another organization goes into both chains.
  s.forget_calls();
  REQUIRE(s.call("POST", "/v1/orgs/beta/api-keys", "superadmin", R"({"name":"first","role":"admin"})").status == 201);
  CHECK(s.calls().back().org_id == org_b);
  CHECK(s.calls().back().target == "first/2/0");
}

TEST_CASE("audit: a page of the caller's chain with its cursor, and the same as JSON Lines", "[api][handlers][audit]") {
  api_server s;
  s.on_world([](api::test::world& w) {
    for (std::int64_t seq = 1; seq <= 3; ++seq)
      w.events.push_back({org_a, seq, "2026-01-01T00:00:00.000Z", "key:k", "sandbox.create", "sbx-a", "ok", "req",
                          "198.51.100.7", R"({"image":"python"})", "prev", "hash"});
    return 0;
  });
  auto res = s.call("GET", "/v1/audit?limit=2&action=sandbox.create", "admin");
  REQUIRE(res.status == 200);
  auto body = json::parse(res.body);
  REQUIRE(body["items"].size() == 2);
  CHECK(body["next_cursor"] == "2");
  CHECK(keys_of(body["items"][0]) == std::set<std::string>{"org_id", "seq", "ts", "actor", "action", "target", "outcome",
                                                           "request_id", "source", "details", "prev_hash", "hash"});
  CHECK(body["items"][0]["details"] == json{{"image", "python"}});
  auto f = s.on_world([](api::test::world& w) { return w.last_filter; });
  CHECK(f.limit == 3);  // one beyond the page: is there more?
  CHECK(f.action == "sandbox.create");
  CHECK(s.calls().back().org_id == org_a);

  auto next = json::parse(s.call("GET", "/v1/audit?limit=2&cursor=2", "admin").body);
  REQUIRE(next["items"].size() == 1);
  CHECK(next["items"][0]["seq"] == 3);
  CHECK(next["next_cursor"].is_null());

  auto lines = s.call("GET", "/v1/audit?format=jsonl&limit=2", "admin");
  REQUIRE(lines.status == 200);
  CHECK(lines.header("content-type") == "application/x-ndjson");
  CHECK(lines.header("x-next-cursor") == "2");
  CHECK(std::count(lines.body.begin(), lines.body.end(), '\n') == 2);

  CHECK(s.call("GET", "/v1/audit?since=yesterday", "admin").status == 400);
  CHECK(s.call("GET", "/v1/audit", "member").status == 403);
}

TEST_CASE("limits: read by the organization's admin, set by the operator, in the documented shape",
          "[api][handlers][guardrails]") {
  api_server s;
  auto res = s.call("GET", "/v1/orgs/alpha/limits", "admin");
  REQUIRE(res.status == 200);
  auto body = json::parse(res.body);
  CHECK(keys_of(body) == std::set<std::string>{"org_id", "limits", "own", "usage", "stopped"});
  CHECK(keys_of(body["limits"]) == std::set<std::string>{"max_sandboxes", "max_cpus", "max_memory_mb", "allowed_images",
                                                         "max_volumes", "max_snapshots", "max_disk_mb",
                                                         "allowed_runtimes"});
  CHECK(body["limits"]["max_sandboxes"] == 10);
  CHECK(body["usage"]["sandboxes"] == 2);
  CHECK(body["stopped"].is_null());
  CHECK(s.calls().back().what == "guardrails.get");
  CHECK(s.calls().back().org_id == org_a);

  CHECK(s.call("PUT", "/v1/orgs/alpha/limits", "admin", R"({"max_sandboxes":3})").status == 403);
  auto set = s.call("PUT", "/v1/orgs/beta/limits", "superadmin", R"({"max_sandboxes":3,"max_cpus":null})");
  REQUIRE(set.status == 200);
  CHECK(json::parse(set.body)["org_id"] == org_b);
  auto u = s.on_world([](api::test::world& w) { return w.last_limits; });
  REQUIRE(u);
  CHECK(u->max_sandboxes.value().value() == 3);
  REQUIRE(u->max_cpus);
  CHECK_FALSE(*u->max_cpus);  // null: back to the default
  CHECK_FALSE(u->max_memory_mb);  // absent: unchanged
  CHECK_FALSE(u->allowed_runtimes);
  CHECK(s.call("PUT", "/v1/orgs/beta/limits", "superadmin", R"({"max_gpus":1})").status == 400);

  // The runtime policy: a list, or null for the default; its names are the service's to check.
  REQUIRE(s.call("PUT", "/v1/orgs/beta/limits", "superadmin", R"({"allowed_runtimes":["gvisor"]})").status == 200);
  u = s.on_world([](api::test::world& w) { return w.last_limits; });
  REQUIRE((u && u->allowed_runtimes && *u->allowed_runtimes));
  CHECK(**u->allowed_runtimes == std::vector<std::string>{"gvisor"});
  REQUIRE(s.call("PUT", "/v1/orgs/beta/limits", "superadmin", R"({"allowed_runtimes":null})").status == 200);
  u = s.on_world([](api::test::world& w) { return w.last_limits; });
  REQUIRE((u && u->allowed_runtimes));
  CHECK_FALSE(*u->allowed_runtimes);
  CHECK(s.call("PUT", "/v1/orgs/beta/limits", "superadmin", R"({"allowed_runtimes":"gvisor"})").status == 400);
}

TEST_CASE("deleting an organization: its keys revoked, its sandboxes, volumes, snapshots, secrets and webhooks removed, its chain "
          "closed",
          "[api][handlers][orgs]") {
  api_server s;
  REQUIRE(s.call("DELETE", "/v1/orgs/beta", "superadmin").status == 204);
  std::vector<std::string> seen;
  for (const auto& c : s.calls())
    if (c.what != "identity.find_org") {
      CHECK(c.org_id == org_b);
      seen.push_back(c.what + (c.what == "identity.set_org_state" || c.what == "sandboxes.remove" ? " " + c.target : ""));
    }
  CHECK(seen == std::vector<std::string>{"identity.set_org_state deleting", "identity.revoke_org_keys",
                                         "sandboxes.list", "sandboxes.remove sbx-b", "volumes.list", "snapshots.list",
                                         "secrets.remove_all", "webhooks.remove_all",
                                         "identity.set_org_state deleted"});
  // The superadmin's own organization cannot be.
  CHECK(s.call("DELETE", "/v1/orgs/superadmin", "superadmin").status == 409);
}

TEST_CASE("volumes and snapshots: the named-resource routes read each kind's create body and answer in its shape",
          "[api][handlers][volumes][snapshots]") {
  api_server s;
  struct kind {
    std::string collection, backend, good_body, unknown_message, mistyped_body, mistyped_field;
    std::set<std::string> fields;
  };
  const std::set<std::string> shared = {"id", "name", "state", "created_at", "updated_at"};
  auto with = [&](std::set<std::string> own) {
    own.insert(shared.begin(), shared.end());
    return own;
  };
  for (const auto& k : {kind{"/v1/volumes", "volumes", R"({"name":"cache","size_mb":null})",
                             "field 'other' is not known (name, size_mb)", R"({"name":1,"size_mb":"x"})", "name",
                             with({"size_mb"})},
                        kind{"/v1/snapshots", "snapshots", R"({"sandbox_id":"sbx-a","name":"cache"})",
                             "field 'other' is not known (sandbox_id, name)", R"({"name":1,"sandbox_id":2})",
                             "sandbox_id", with({"size_bytes", "source_sandbox_id"})}}) {
    INFO(k.collection);
    s.forget_calls();
    auto made = s.call("POST", k.collection, "member", k.good_body);
    REQUIRE(made.status == 201);
    CHECK(keys_of(json::parse(made.body)) == k.fields);
    auto calls = s.calls();
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].what == k.backend + ".create");
    CHECK(calls[0].org_id == org_a);
    CHECK(calls[0].target == "cache");
    CHECK(calls[0].actor == "key:key-member");

    // A body the kind does not take reaches no backend: an unknown field names the known ones in
    // the kind's order; of two wrongly typed ones, the first the kind reads is named.
    s.forget_calls();
    auto unknown = s.call("POST", k.collection, "member", R"({"name":"cache","other":1})");
    CHECK(unknown.status == 400);
    CHECK(json::parse(unknown.body)["error"]["message"] == k.unknown_message);
    auto mistyped = s.call("POST", k.collection, "member", k.mistyped_body);
    CHECK(mistyped.status == 400);
    CHECK(json::parse(mistyped.body)["error"]["message"].get<std::string>().starts_with("field '" + k.mistyped_field + "'"));
    CHECK(s.calls().empty());
    CHECK(s.call("POST", k.collection, "viewer", k.good_body).status == 403);

    auto listed = s.call("GET", k.collection + "?limit=5", "viewer");
    REQUIRE(listed.status == 200);
    CHECK(json::parse(listed.body) == json{{"items", json::array()}, {"next_cursor", nullptr}});
    const std::string own = k.backend == "volumes" ? "vol-a" : "snap-a";
    auto got = s.call("GET", k.collection + "/" + own, "viewer");
    REQUIRE(got.status == 200);
    CHECK(keys_of(json::parse(got.body)) == k.fields);
    CHECK(json::parse(got.body)["name"] == own);
    s.forget_calls();
    CHECK(s.call("DELETE", k.collection + "/" + own, "member").status == 204);
    REQUIRE(s.calls().size() == 1);
    CHECK(s.calls()[0].what == k.backend + ".remove");
    CHECK(s.calls()[0].target == own);
  }
}

TEST_CASE("the console's cookie: the key's principal, a change needs its CSRF token and this host's Origin",
          "[api][handlers][console]") {
  api_server s;
  const std::string cookie = "Cookie: theme=dark; sandfort_session=member\r\n";
  const std::string from_console = "Origin: http://localhost\r\nX-Sandfort-CSRF: csrf-member\r\n";
  auto session = s.call("GET", "/v1/console/session", "", "", cookie);
  REQUIRE(session.status == 200);
  CHECK(json::parse(session.body)["csrf_token"] == "csrf-member");
  CHECK(json::parse(session.body)["role"] == "member");
  // With a key instead of the cookie there is no session to show.
  CHECK(s.call("GET", "/v1/console/session", "member").status == 404);
  CHECK(s.call("GET", "/v1/sandboxes", "", "", cookie).status == 200);

  s.forget_calls();
  for (const std::string& forged : {std::string(), std::string("Origin: http://localhost\r\n"),
                                    std::string("X-Sandfort-CSRF: csrf-member\r\n"),
                                    std::string("Origin: http://evil.example\r\nX-Sandfort-CSRF: csrf-member\r\n"),
                                    std::string("Origin: http://localhost\r\nX-Sandfort-CSRF: csrf-viewer\r\n")}) {
    INFO(forged);
    auto refused = s.call("POST", "/v1/sandboxes", "", "{}", cookie + forged);
    CHECK(refused.status == 403);
    CHECK(json::parse(refused.body)["error"]["code"] == "permission_denied");
  }
  CHECK(s.calls().empty());  // nothing reached a backend
  CHECK(s.call("POST", "/v1/sandboxes", "", "{}", cookie + from_console).status == 201);

  // A viewer's session is a viewer: the role is checked before anything else.
  auto viewer = s.call("POST", "/v1/sandboxes", "", "{}",
                       "Cookie: sandfort_session=viewer\r\nOrigin: http://localhost\r\nX-Sandfort-CSRF: csrf-viewer\r\n");
  CHECK(viewer.status == 403);
  CHECK_THAT(json::parse(viewer.body)["error"]["message"].get<std::string>(), Catch::Contains("role viewer"));

  // Opening a session wants a key in Authorization, not another session.
  CHECK(s.call("POST", "/v1/console/session", "", "", cookie + from_console).status == 400);
  s.forget_calls();
  auto out = s.call("DELETE", "/v1/console/session", "", "", cookie + from_console);
  CHECK(out.status == 204);
  CHECK_THAT(out.headers["set-cookie"], Catch::Contains("sandfort_session=;") && Catch::Contains("Max-Age=0"));
  auto calls = s.calls();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].what == "identity.close_console_session");
}

TEST_CASE("the console's sign-in through an identity provider: issuers, start and callback as redirects",
          "[api][handlers][console]") {
  api_server s;
  auto issuers = s.call("GET", "/v1/console/oidc/issuers", "");
  REQUIRE(issuers.status == 200);
  CHECK(json::parse(issuers.body) == json::parse(R"({"items": [{"id": "0123456789abcdef", "name": "Example IdP"}]})"));

  // start: to the provider, with a pre-login cookie (Lax: the way back is a cross-site navigation);
  // the callback on the origin the browser used.
  auto start = s.call("GET", "/v1/console/oidc/start?issuer=0123456789abcdef", "");
  CHECK(start.status == 302);
  CHECK(start.headers["location"] == "https://idp.example.test/authorize?state=s");
  CHECK(start.headers["cache-control"] == "no-store");
  CHECK(start.headers["set-cookie"] ==
        "sandfort_login=" + std::string(64, 'b') + "; Path=/; HttpOnly; SameSite=Lax; Max-Age=300");
  CHECK(s.on_world([](auto& w) { return w.last_redirect_uri; }) == "http://localhost/v1/console/oidc/callback");
  // A missing or unknown issuer, or a Host that is no host, is a bad request in the API's shape.
  for (const std::string& target : {std::string("/v1/console/oidc/start"),
                                    std::string("/v1/console/oidc/start?issuer=ffffffffffffffff")}) {
    auto bad = s.call("GET", target, "");
    CHECK(bad.status == 400);
    CHECK(json::parse(bad.body)["error"]["code"] == "invalid_argument");
  }

  // callback: signed in → the session cookie, the pre-login cookie cleared, to the console.
  s.forget_calls();
  auto done = s.call("GET", "/v1/console/oidc/callback?code=c0de&state=5ta7e&iss=https%3A%2F%2Fidp.example.test", "",
                     "", "Cookie: sandfort_login=" + std::string(64, 'b') + "\r\n");
  CHECK(done.status == 302);
  CHECK(done.headers["location"] == "/console/");
  CHECK_THAT(done.headers["set-cookie"], Catch::StartsWith("sandfort_session=" + std::string(64, 'd') +
                                                           "; Path=/; HttpOnly; SameSite=Strict; Max-Age="));
  auto cb = s.on_world([](auto& w) { return w.last_callback; });
  CHECK(cb.code == "c0de");
  CHECK(cb.state == "5ta7e");
  CHECK(cb.iss == "https://idp.example.test");
  CHECK(cb.browser_secret == std::string(64, 'b'));
  auto calls = s.calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[1].what == "identity.open_identity_console_session");
  CHECK(calls[1].actor == "oidc:alice@https://idp.example.test");

  // A refusal goes back to the sign-in page with its short code, the pre-login cookie cleared;
  // anything else than a known code is "internal", never a message of the provider's.
  for (const auto& [message, code] : std::vector<std::pair<std::string, std::string>>{
           {"wrong_browser", "wrong_browser"}, {"<script>alert(1)</script>", "internal"}}) {
    s.on_world([m = message](auto& w) {
      w.login_failure = make_error(errc::unauthenticated, m);
      return 0;
    });
    auto refused = s.call("GET", "/v1/console/oidc/callback?code=c&state=s", "");
    CHECK(refused.status == 302);
    CHECK(refused.headers["location"] == "/console/#/signin?error=" + code);
    CHECK(refused.headers["set-cookie"] == "sandfort_login=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0");
    CHECK(refused.body.empty());
  }
}

TEST_CASE("secrets: a create's body is checked and handed on normalized, no answer or error carries the value",
          "[api][handlers][secrets]") {
  api_server s;
  const std::string body =
      R"({"name":"openai","value":"sk-SECRET-1","hosts":["API.OpenAI.com."],"header":"Authorization","format":"Bearer {value}"})";
  CHECK(s.call("POST", "/v1/secrets", "member", body).status == 403);
  auto made = s.call("POST", "/v1/secrets", "admin", body);
  REQUIRE(made.status == 201);
  CHECK(made.body.find("sk-SECRET-1") == std::string::npos);
  const auto j = json::parse(made.body);
  CHECK(keys_of(j) == std::set<std::string>{"name", "hosts", "placement", "version", "created_at", "updated_at"});
  CHECK(j["hosts"] == json::array({"api.openai.com"}));
  CHECK(j["placement"] == json{{"type", "header"}, {"header", "Authorization"}, {"format", "Bearer {value}"}});
  CHECK(s.calls().back().what == "secrets.create");
  CHECK(s.calls().back().org_id == org_a);

  for (const char* bad : {
           R"({"name":"x","value":"sk-SECRET-1\r\nX: y","hosts":["a.example"],"header":"X-Key"})",
           R"({"name":"x","value":"sk-SECRET-1","hosts":["*"],"header":"X-Key"})",
           R"({"name":"x","value":"sk-SECRET-1","hosts":["a.example"],"header":"X-Key","query":"k"})",
           R"({"name":"x","value":"sk-SECRET-1","hosts":["a.example"],"basic_auth":{"username":"u","password":"p"}})",
       }) {
    INFO(bad);
    s.forget_calls();
    auto refused = s.call("POST", "/v1/secrets", "admin", bad);
    CHECK(refused.status == 400);
    CHECK(json::parse(refused.body)["error"]["code"] == "invalid_argument");
    CHECK(refused.body.find("sk-SECRET-1") == std::string::npos);
    CHECK(s.calls().empty());  // refused before any backend is asked
  }
  auto query = s.call("POST", "/v1/secrets", "admin", R"({"name":"maps","value":"v","hosts":["*.maps.example"],"query":"key"})");
  REQUIRE(query.status == 201);
  CHECK(json::parse(query.body)["placement"] == json{{"type", "query"}, {"query", "key"}});
  auto rotation = s.call("PUT", "/v1/secrets/openai", "admin", R"({"hosts":["b.example"],"value":"sk-SECRET-2"})");
  CHECK(rotation.status == 200);
  CHECK(rotation.body.find("sk-SECRET-2") == std::string::npos);
  CHECK(s.call("PUT", "/v1/secrets/openai", "admin", "{}").status == 400);
  CHECK(s.call("GET", "/v1/interception-ca", "viewer").status == 200);
}

TEST_CASE("webhooks: admins only, bodies checked before any backend is asked, the secret only in create's answer",
          "[api][handlers][webhooks]") {
  api_server s;
  const std::string body = R"({"url":"https://hooks.example/in","types":["sandbox.stopped","sandbox.stopped"]})";
  CHECK(s.call("POST", "/v1/webhooks", "member", body).status == 403);
  CHECK(s.call("GET", "/v1/webhooks", "viewer").status == 403);
  CHECK(s.call("GET", "/v1/webhooks/whk-1/deliveries", "member").status == 403);
  auto made = s.call("POST", "/v1/webhooks", "admin", body);
  REQUIRE(made.status == 201);
  const auto j = json::parse(made.body);
  CHECK(j["secret"] == "whsec_x");
  CHECK(j["types"] == json::array({"sandbox.stopped"}));  // repeated types once
  CHECK(s.calls().back().what == "webhooks.create");
  auto got = s.call("GET", "/v1/webhooks/whk-1", "admin");
  REQUIRE(got.status == 200);
  CHECK_FALSE(json::parse(got.body).contains("secret"));
  for (const char* bad : {R"({})", R"({"url":""})", R"({"url":"https://x.example","types":["sandbox.exploded"]})",
                          R"({"url":"https://x.example","secret":"mine"})", R"({"url":7})",
                          R"({"url":"https://x.example","description":"a\nb"})"}) {
    INFO(bad);
    s.forget_calls();
    auto refused = s.call("POST", "/v1/webhooks", "admin", bad);
    CHECK(refused.status == 400);
    CHECK(json::parse(refused.body)["error"]["code"] == "invalid_argument");
    CHECK(s.calls().empty());
  }
  s.forget_calls();
  CHECK(s.call("PATCH", "/v1/webhooks/whk-1", "admin", "{}").status == 400);
  CHECK(s.call("PATCH", "/v1/webhooks/whk-1", "admin", R"({"enabled":"no"})").status == 400);
  CHECK(s.calls().empty());
  CHECK(s.call("PATCH", "/v1/webhooks/whk-1", "admin", R"({"enabled":false})").status == 200);
  CHECK(s.call("GET", "/v1/webhooks/whk-1/deliveries?limit=0", "admin").status == 400);
  CHECK(s.call("GET", "/v1/webhooks/whk-1/deliveries?limit=10&cursor=5", "admin").status == 200);
  auto rotated = s.call("POST", "/v1/webhooks/whk-1/rotate-secret", "admin");
  REQUIRE(rotated.status == 200);
  CHECK(json::parse(rotated.body)["secret"] == "whsec_y");
  CHECK(s.call("DELETE", "/v1/webhooks/whk-1", "admin").status == 204);
}
