#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "sandfort/core/config.hpp"

using namespace sandfort;

namespace {
std::string write_temp(const std::string& text) {
  char path[] = "/tmp/sandfort-config-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("defaults apply without a file") {
  auto c = load_config("", {}, nullptr);
  REQUIRE(c.ok());
  CHECK(c->listen == "127.0.0.1:8080");
  CHECK(c->default_image == "sandfort/base:bookworm");
}

TEST_CASE("file, then environment, then overrides") {
  auto path = write_temp(R"({"listen":"127.0.0.1:9000","max_resources":{"cpus":2.5},"log_format":"json"})");
  char env1[] = "SANDFORT_LISTEN=127.0.0.1:9100";
  char env2[] = "SANDFORT_MAX_RESOURCES_PIDS=77";
  char env3[] = "UNRELATED=1";
  char* env[] = {env1, env2, env3, nullptr};
  auto c = load_config(path, {{"max_resources.memory_mb", "2048"}}, env);
  REQUIRE(c.ok());
  CHECK(c->listen == "127.0.0.1:9100");
  CHECK(c->max_resources.cpus == 2.5);
  CHECK(c->max_resources.pids == 77);
  CHECK(c->max_resources.memory_mb == 2048);
  CHECK(c->log_format == "json");
  std::remove(path.c_str());
}

TEST_CASE("typos and wrong types are errors, not silently ignored") {
  auto typo = write_temp(R"({"lisen":"x"})");
  auto r1 = load_config(typo, {}, nullptr);
  REQUIRE_FALSE(r1.ok());
  CHECK(r1.err().message.find("lisen") != std::string::npos);

  auto wrong = write_temp(R"({"idle_timeout_s":"soon"})");
  CHECK_FALSE(load_config(wrong, {}, nullptr).ok());

  auto broken = write_temp("{not json");
  CHECK_FALSE(load_config(broken, {}, nullptr).ok());

  CHECK_FALSE(load_config("", {{"no_such_key", "1"}}, nullptr).ok());
  CHECK_FALSE(load_config("", {{"idle_timeout_s", "abc"}}, nullptr).ok());
  for (auto& p : {typo, wrong, broken}) std::remove(p.c_str());
}

TEST_CASE("finalize derives paths and rejects unusable values") {
  auto c = load_config("", {{"state_dir", "/tmp/sf"}}, nullptr);
  REQUIRE(c.ok());
  REQUIRE(finalize_config(*c, "/opt/sandfort/bin").ok());
  CHECK(c->database == "/tmp/sf/sandfort.db");

  // Agent sockets are no longer under state_dir, so a long path is fine.
  auto long_dir = load_config("", {{"state_dir", "/tmp/" + std::string(100, 'x')}}, nullptr);
  REQUIRE(long_dir.ok());
  CHECK(finalize_config(*long_dir, "/").ok());

  auto small_budget = load_config("", {{"agent_response_budget_mb", "8"}}, nullptr);
  REQUIRE(small_budget.ok());
  CHECK_FALSE(finalize_config(*small_budget, "/").ok());

  auto bad_format = load_config("", {{"log_format", "xml"}}, nullptr);
  REQUIRE(bad_format.ok());
  CHECK_FALSE(finalize_config(*bad_format, "/").ok());
}

TEST_CASE("network, egress and preview settings come from every layer") {
  auto path = write_temp(R"({"network":{"subnet":"10.99.0.0/24","host_firewall":false},"preview":{"domain":"p.example"}})");
  char env1[] = "SANDFORT_EGRESS_ALLOWED_RANGES=127.0.0.0/8,::1/128";
  char* env[] = {env1, nullptr};
  auto c = load_config(path, {{"egress.max_tunnels_per_sandbox", "3"}, {"network.bridge", "sfx0"}}, env);
  REQUIRE(c.ok());
  CHECK(c->network.subnet == "10.99.0.0/24");
  CHECK_FALSE(c->network.host_firewall);
  CHECK(c->network.bridge == "sfx0");
  CHECK(c->network.name == "sandfort");
  CHECK(c->egress.allowed_ranges == "127.0.0.0/8,::1/128");
  CHECK(c->egress.max_tunnels_per_sandbox == 3);
  CHECK(c->egress.proxy_port == 3128);
  CHECK(c->preview.domain == "p.example");
  CHECK(c->preview.listen == "127.0.0.1:8081");
}

TEST_CASE("the listeners' idle-connection caps come from every layer and must be positive") {
  auto defaults = load_config("", {}, nullptr);
  REQUIRE(defaults.ok());
  CHECK(defaults->max_idle_connections_per_source == 64);
  CHECK(defaults->max_idle_connections == 512);
  CHECK(defaults->preview.max_idle_connections_per_source == 64);
  CHECK(defaults->preview.max_idle_connections == 512);
  auto path = write_temp(R"({"max_idle_connections":100,"preview":{"max_idle_connections_per_source":8}})");
  char env1[] = "SANDFORT_MAX_IDLE_CONNECTIONS_PER_SOURCE=16";
  char* env[] = {env1, nullptr};
  auto c = load_config(path, {{"preview.max_idle_connections", "40"}}, env);
  std::remove(path.c_str());
  REQUIRE(c.ok());
  CHECK(c->max_idle_connections == 100);
  CHECK(c->max_idle_connections_per_source == 16);
  CHECK(c->preview.max_idle_connections_per_source == 8);
  CHECK(c->preview.max_idle_connections == 40);
  for (const char* key : {"max_idle_connections", "max_idle_connections_per_source", "preview.max_idle_connections",
                          "preview.max_idle_connections_per_source"}) {
    auto zero = load_config("", {{key, "0"}}, nullptr);
    REQUIRE(zero.ok());
    auto r = finalize_config(*zero, "/tmp");
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().message.find("max_idle_connections") != std::string::npos);
  }
}

TEST_CASE("an interface name longer than the kernel allows is refused") {
  auto c = load_config("", {{"network.bridge", "sandfort-bridge-0"}}, nullptr);
  REQUIRE(c.ok());
  auto r = finalize_config(*c, "/tmp");
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().message.find("network.bridge") != std::string::npos);
}

TEST_CASE("images.allowed_registries is a list in the file, comma-separated elsewhere") {
  auto defaults = load_config("", {}, nullptr);
  REQUIRE(defaults.ok());
  CHECK(defaults->images.allowed_registries.empty());  // the default image's registry and docker.io

  auto path = write_temp(R"({"images":{"allowed_registries":["127.0.0.1:5000","ghcr.io"]}})");
  auto from_file = load_config(path, {}, nullptr);
  REQUIRE(from_file.ok());
  CHECK(from_file->images.allowed_registries == std::vector<std::string>{"127.0.0.1:5000", "ghcr.io"});
  char env1[] = "SANDFORT_IMAGES_ALLOWED_REGISTRIES=docker.io, quay.io,,";
  char* env[] = {env1, nullptr};
  auto from_env = load_config(path, {}, env);
  REQUIRE(from_env.ok());
  CHECK(from_env->images.allowed_registries == std::vector<std::string>{"docker.io", "quay.io"});
  auto from_flag = load_config(path, {{"images.allowed_registries", "*"}}, env);
  REQUIRE(from_flag.ok());
  CHECK(from_flag->images.allowed_registries == std::vector<std::string>{"*"});
  std::remove(path.c_str());

  for (const char* wrong : {R"({"images":{"allowed_registries":"ghcr.io"}})",
                            R"({"images":{"allowed_registries":[1]}})",
                            R"({"images":{"allowed_registries":{"a":"b"}}})"}) {
    INFO(wrong);
    auto p = write_temp(wrong);
    CHECK_FALSE(load_config(p, {}, nullptr).ok());
    std::remove(p.c_str());
  }
  auto bad_entry = load_config("", {{"images.allowed_registries", "ghcr.io/team"}}, nullptr);
  REQUIRE(bad_entry.ok());
  auto r = finalize_config(*bad_entry, "/tmp");
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().message.find("images.allowed_registries") != std::string::npos);
}

TEST_CASE("oidc.issuers is a list of objects in the file, checked field by field") {
  auto path = write_temp(R"({"oidc": {"leeway_s": 30, "issuers": [
      {"issuer": "https://idp.example.com/realms/eng", "audience": ["sandfort", "api"], "org_claim": "org",
       "role_map": {"sandfort-admins": "admin", "devs": "member"}},
      {"issuer": "http://127.0.0.1:9999", "audience": "sandfort", "org": "acme", "default_role": "viewer",
       "algorithms": "ES256", "role_claim": "realm_access.roles"}]}})");
  auto c = load_config(path, {}, nullptr);
  REQUIRE(c.ok());
  REQUIRE(c->oidc.issuers.size() == 2);
  CHECK(c->oidc.leeway_s == 30);
  const auto& a = c->oidc.issuers[0];
  CHECK(a.audiences == std::vector<std::string>{"sandfort", "api"});
  CHECK(a.algorithms == std::vector<std::string>{"RS256", "ES256", "EdDSA"});
  CHECK(a.role_claim == "groups");
  CHECK(a.role_map.at("devs") == "member");
  const auto& b = c->oidc.issuers[1];
  CHECK(b.audiences == std::vector<std::string>{"sandfort"});
  CHECK(b.algorithms == std::vector<std::string>{"ES256"});
  CHECK(b.org == "acme");
  CHECK(finalize_config(*c, "/usr/bin").ok());
}

TEST_CASE("an issuer that cannot work is refused at start, with the field named") {
  auto refused = [](const std::string& issuer_json, const std::string& expected) {
    auto path = write_temp(R"({"oidc": {"issuers": [)" + issuer_json + "]}}");
    auto c = load_config(path, {}, nullptr);
    if (c.ok()) {
      auto f = finalize_config(*c, "/usr/bin");
      REQUIRE_FALSE(f.ok());
      CHECK_THAT(f.err().message, Catch::Contains(expected));
    } else {
      CHECK_THAT(c.err().message, Catch::Contains(expected));
    }
  };
  refused(R"({"issuer": "https://a", "audience": "x", "org": "acme", "secret": "y"})", "unknown key oidc.issuers[0].secret");
  refused(R"({"issuer": "https://a", "org": "acme"})", "audience is required");
  refused(R"({"issuer": "https://a", "audience": "x"})", "exactly one of org_claim and org");
  refused(R"({"issuer": "https://a", "audience": "x", "org": "acme", "algorithms": ["HS256"]})", "'HS256' is not one of");
  refused(R"({"issuer": "https://a", "audience": "x", "org": "acme", "algorithms": ["none"]})", "'none' is not one of");
  refused(R"({"issuer": "https://a", "audience": "x", "org": "acme", "role_map": {"g": "root"}})", "'root' is not admin");
  refused(R"({"issuer": "ftp://a", "audience": "x", "org": "acme"})", "https:// URL");
  refused(R"({"issuer": "https://a", "audience": 5, "org": "acme"})", "must be a string or a list");
  refused(R"("https://a")", "must be an object");
}

TEST_CASE("console sign-in per issuer: client id, a secret from a file only others cannot read, scopes, a label") {
  auto secret = write_temp("s3cret-value\n");
  REQUIRE(::chmod(secret.c_str(), 0600) == 0);
  auto path = write_temp(R"({"console": {"public_url": "https://sandfort.example.com/"}, "oidc": {"issuers": [
      {"issuer": "https://idp.example.com", "audience": "sandfort", "org": "acme", "default_role": "viewer",
       "console_client_id": "sandfort-console", "console_client_secret_file": ")" + secret + R"(",
       "console_scopes": ["openid", "email"], "console_name": "Example SSO"},
      {"issuer": "https://public.example.com", "audience": "sandfort", "org": "acme", "default_role": "viewer",
       "console_client_id": "sandfort-spa", "console_client_auth": "client_secret_post"},
      {"issuer": "https://tokens-only.example.com", "audience": "sandfort", "org": "acme", "default_role": "viewer"}]}})");
  auto c = load_config(path, {}, nullptr);
  REQUIRE(c.ok());
  REQUIRE(finalize_config(*c, "/usr/bin").ok());
  CHECK(c->console.public_url == "https://sandfort.example.com");  // an origin: the trailing / goes
  const auto& a = c->oidc.issuers[0];
  CHECK(a.console_client_id == "sandfort-console");
  CHECK(a.console_client_secret == "s3cret-value");  // the file's newline is no part of it
  CHECK(a.console_client_auth == "client_secret_basic");
  CHECK(a.console_scopes == std::vector<std::string>{"openid", "email"});
  CHECK(a.console_name == "Example SSO");
  const auto& b = c->oidc.issuers[1];
  CHECK(b.console_client_secret.empty());  // a public client: PKCE alone
  CHECK(b.console_client_auth == "client_secret_post");
  CHECK(b.console_scopes == std::vector<std::string>{"openid"});
  CHECK(c->oidc.issuers[2].console_client_id.empty());
  // From the environment like any other key.
  char env1[] = "SANDFORT_CONSOLE_PUBLIC_URL=https://console.example.org";
  char* env[] = {env1, nullptr};
  auto from_env = load_config("", {}, env);
  REQUIRE(from_env.ok());
  CHECK(from_env->console.public_url == "https://console.example.org");
}

TEST_CASE("console sign-in that cannot work is refused at start, with the field named") {
  auto refused = [](const std::string& json_text, const std::string& expected) {
    auto c = load_config(write_temp(json_text), {}, nullptr);
    if (!c.ok()) {
      CHECK_THAT(c.err().message, Catch::Contains(expected));
      return;
    }
    auto f = finalize_config(*c, "/usr/bin");
    REQUIRE_FALSE(f.ok());
    CHECK_THAT(f.err().message, Catch::Contains(expected));
  };
  auto issuer = [](const std::string& extra) {
    return R"({"oidc": {"issuers": [{"issuer": "https://a", "audience": "x", "org": "acme", "default_role": "viewer", )" +
           extra + "}]}}";
  };
  auto readable = write_temp("s3cret");
  REQUIRE(::chmod(readable.c_str(), 0644) == 0);
  auto empty = write_temp("\n");
  REQUIRE(::chmod(empty.c_str(), 0600) == 0);
  refused(issuer(R"("console_client_secret": "inline")"), "unknown key oidc.issuers[0].console_client_secret");
  refused(issuer(R"("console_client_secret_file": "/x")"), "need console_client_id");
  refused(issuer(R"("console_client_id": "c", "console_client_secret_file": "/nonexistent/secret")"), "not a readable file");
  refused(issuer(R"("console_client_id": "c", "console_client_secret_file": ")" + readable + "\""), "others may read it");
  refused(issuer(R"("console_client_id": "c", "console_client_secret_file": ")" + empty + "\""), "empty");
  refused(issuer(R"("console_client_id": "c d")"), "console_client_id must be");
  refused(issuer(R"("console_client_id": "c", "console_scopes": ["email"])"), "must include openid");
  refused(issuer(R"("console_client_id": "c", "console_scopes": ["openid", "a b"])"), "not a scope token");
  refused(issuer(R"("console_client_id": "c", "console_client_auth": "private_key_jwt")"), "client_secret_basic or");
  refused(issuer(R"("console_client_id": "c", "console_name": "a\u0007b")"), "console_name must be");
  for (const char* url : {"sandfort.example.com", "https://h/console", "https://h?x", "ftp://h", "https://u@h",
                                "https://"})
    refused(R"({"console": {"public_url": ")" + std::string(url) + R"("}})", "console.public_url must be an origin");
}

TEST_CASE("oidc.issuers cannot come from the environment or --set") {
  auto r = load_config("", {{"oidc.issuers", "https://a"}}, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.err().message, Catch::Contains("unknown key oidc.issuers"));
  char env1[] = "SANDFORT_OIDC_ISSUERS=https://a";
  char env2[] = "SANDFORT_OIDC_LEEWAY_S=5";
  char* env[] = {env1, env2, nullptr};
  auto c = load_config("", {}, env);
  REQUIRE(c.ok());
  CHECK(c->oidc.issuers.empty());
  CHECK(c->oidc.leeway_s == 5);
}

TEST_CASE("audit settings: the signing key defaults into the state directory") {
  auto c = load_config("", {{"state_dir", "/var/lib/sf"}, {"audit.checkpoint_interval_s", "60"}}, nullptr);
  REQUIRE(c.ok());
  REQUIRE(finalize_config(*c, "/usr/bin").ok());
  CHECK(c->audit.key_path == "/var/lib/sf/audit-signing.key");
  CHECK(c->audit.checkpoint_interval_s == 60);
  auto bad = load_config("", {{"audit.summary_interval_s", "0"}}, nullptr);
  REQUIRE(bad.ok());
  CHECK_FALSE(finalize_config(*bad, "/usr/bin").ok());
}

TEST_CASE("secrets settings: the key file defaults into the state directory, the bounds are checked") {
  auto c = load_config("", {{"state_dir", "/var/lib/sf"}}, nullptr);
  REQUIRE(c.ok());
  REQUIRE(finalize_config(*c, "/usr/bin").ok());
  CHECK(c->secrets.key_file == "/var/lib/sf/secrets.key");
  CHECK(c->secrets.max_per_org == 100);
  CHECK(c->secrets.max_value_bytes == 8192);
  char env1[] = "SANDFORT_SECRETS_KEY_FILE=/etc/sandfort/secrets.key";
  char* env[] = {env1, nullptr};
  auto e = load_config("", {{"secrets.max_per_org", "5"}}, env);
  REQUIRE(e.ok());
  REQUIRE(finalize_config(*e, "/usr/bin").ok());
  CHECK(e->secrets.key_file == "/etc/sandfort/secrets.key");
  CHECK(e->secrets.max_per_org == 5);
  for (const char* bad : {"secrets.max_per_org=0", "secrets.max_value_bytes=0", "secrets.max_value_bytes=65537"}) {
    const std::string kv = bad;
    const auto eq = kv.find('=');
    auto b = load_config("", {{kv.substr(0, eq), kv.substr(eq + 1)}}, nullptr);
    REQUIRE(b.ok());
    CHECK_FALSE(finalize_config(*b, "/usr/bin").ok());
  }
}

TEST_CASE("webhooks settings: defaults, environment and --set, the bounds are checked") {
  auto d = load_config("", {}, nullptr);
  REQUIRE(d.ok());
  REQUIRE(finalize_config(*d, "/usr/bin").ok());
  CHECK(d->webhooks.max_per_org == 10);
  CHECK(d->webhooks.allowed_ranges.empty());
  CHECK(d->webhooks.concurrency == 4);
  CHECK(d->webhooks.timeout_s == 10);
  CHECK(d->webhooks.max_age_s == 86400);
  char env1[] = "SANDFORT_WEBHOOKS_ALLOWED_RANGES=172.17.0.1/32";
  char* env[] = {env1, nullptr};
  auto e = load_config("", {{"webhooks.retry_base_ms", "200"}, {"webhooks.retry_max_ms", "1000"}}, env);
  REQUIRE(e.ok());
  REQUIRE(finalize_config(*e, "/usr/bin").ok());
  CHECK(e->webhooks.allowed_ranges == "172.17.0.1/32");
  CHECK(e->webhooks.retry_base_ms == 200);
  CHECK(e->webhooks.retry_max_ms == 1000);
  for (const char* bad : {"webhooks.concurrency=0", "webhooks.timeout_s=0", "webhooks.retry_base_ms=0",
                          "webhooks.retry_max_ms=10", "webhooks.max_age_s=0", "webhooks.poll_interval_ms=1",
                          "webhooks.max_per_org=1001"}) {
    const std::string kv = bad;
    const auto eq = kv.find('=');
    auto b = load_config("", {{kv.substr(0, eq), kv.substr(eq + 1)}}, nullptr);
    REQUIRE(b.ok());
    INFO(bad);
    CHECK_FALSE(finalize_config(*b, "/usr/bin").ok());
  }
}

TEST_CASE("store settings: retention of deleted sandboxes from file, environment and --set, checked") {
  auto d = load_config("", {}, nullptr);
  REQUIRE(d.ok());
  CHECK(d->store.deleted_retention_s == 7 * 24 * 3600);
  CHECK(d->store.maintenance_interval_s == 60);

  auto path = write_temp(R"({"store": {"deleted_retention_s": 3600, "maintenance_interval_s": 5}})");
  char env1[] = "SANDFORT_STORE_MAINTENANCE_INTERVAL_S=7";
  char* env[] = {env1, nullptr};
  auto c = load_config(path, {}, env);
  REQUIRE(c.ok());
  CHECK(c->store.deleted_retention_s == 3600);
  CHECK(c->store.maintenance_interval_s == 7);
  REQUIRE(finalize_config(*c, "/usr/bin").ok());
  std::remove(path.c_str());

  auto keep = load_config("", {{"store.deleted_retention_s", "0"}}, nullptr);
  REQUIRE(keep.ok());
  CHECK(keep->store.deleted_retention_s == 0);
  CHECK(finalize_config(*keep, "/usr/bin").ok());

  CHECK_FALSE(load_config("", {{"store.deleted_retention_s", "-1"}}, nullptr).ok());
  CHECK_FALSE(load_config("", {{"store.deleted_retention_s", "week"}}, nullptr).ok());
  auto negative = write_temp(R"({"store": {"deleted_retention_s": -5}})");
  auto n = load_config(negative, {}, nullptr);
  REQUIRE(n.ok());
  CHECK_THAT(finalize_config(*n, "/usr/bin").err().message, Catch::Contains("store.deleted_retention_s"));
  std::remove(negative.c_str());
  for (const char* interval : {"0", "86401"}) {
    auto bad = load_config("", {{"store.maintenance_interval_s", interval}}, nullptr);
    REQUIRE(bad.ok());
    CHECK_FALSE(finalize_config(*bad, "/usr/bin").ok());
  }
}

TEST_CASE("pools are a list of objects in the file, image and resources default, mistakes are refused") {
  auto path = write_temp(R"({"default_image": "img:1", "pools": [{"size": 3},
      {"image": "other:2", "resources": {"cpus": 2, "memory_mb": 2048, "pids": 100}, "size": 1}]})");
  auto c = load_config(path, {}, nullptr);
  REQUIRE(c.ok());
  REQUIRE(finalize_config(*c, "/usr/bin").ok());
  REQUIRE(c->pools.size() == 2);
  CHECK(c->pools[0].image == "img:1");
  CHECK(c->pools[0].min_size == 3);
  CHECK(c->pools[0].max_size == 3);  // "size" alone: a pool of fixed size, as before pools learned
  CHECK(c->pools[0].resources->cpus == c->default_resources.cpus);
  CHECK(c->pools[1].image == "other:2");
  CHECK(c->pools[1].resources->memory_mb == 2048);

  auto refused = [](const std::string& pools_json, const std::string& expected) {
    auto p = write_temp(R"({"pools": )" + pools_json + "}");
    auto r = load_config(p, {}, nullptr);
    if (r.ok()) {
      auto f = finalize_config(*r, "/usr/bin");
      REQUIRE_FALSE(f.ok());
      CHECK_THAT(f.err().message, Catch::Contains(expected));
    } else {
      CHECK_THAT(r.err().message, Catch::Contains(expected));
    }
  };
  refused(R"([{"size": 1, "warm": true}])", "pools[0]: unknown key warm");
  refused(R"([{}])", "pools[0] needs one of size and min_size");
  refused(R"([{"size": 1, "min_size": 1}])", "pools[0] needs one of size and min_size");
  refused(R"([{"size": "2"}])", "pools[0].size must be a whole number");
  refused(R"([{"size": 65}])", "must be 0 to 64");
  refused(R"([{"min_size": 4, "max_size": 3}])", "pools[0].max_size must be min_size to 64");
  refused(R"([{"min_size": 0, "max_size": 65}])", "pools[0].max_size must be min_size to 64");
  refused(R"([{"size": 1, "resources": {"cpus": 99, "memory_mb": 1024, "pids": 100}}])", "within max_resources");
  refused(R"([{"size": 1, "resources": {"cpus": 1}}])", "resources must be");
  refused(R"([{"size": 1}, {"size": 2}])", "pools[1] has the same image and resources as pools[0]");
  refused(R"({"size": 1})", "must be a list");
  auto set = load_config("", {{"pools", "x"}}, nullptr);
  REQUIRE_FALSE(set.ok());
}

TEST_CASE("guardrails: volume and snapshot quotas default to 20 and come from every layer, checked") {
  auto d = load_config("", {}, nullptr);
  REQUIRE(d.ok());
  CHECK(d->guardrails.max_volumes == 20);
  CHECK(d->guardrails.max_snapshots == 20);

  auto path = write_temp(R"({"guardrails": {"max_volumes": 5, "max_snapshots": 6}})");
  char env1[] = "SANDFORT_GUARDRAILS_MAX_SNAPSHOTS=7";
  char* env[] = {env1, nullptr};
  auto c = load_config(path, {}, env);
  REQUIRE(c.ok());
  CHECK(c->guardrails.max_volumes == 5);
  CHECK(c->guardrails.max_snapshots == 7);
  REQUIRE(finalize_config(*c, "/usr/bin").ok());
  std::remove(path.c_str());

  auto set = load_config("", {{"guardrails.max_volumes", "0"}}, nullptr);
  REQUIRE(set.ok());
  CHECK(set->guardrails.max_volumes == 0);  // no volumes at all
  CHECK(finalize_config(*set, "/usr/bin").ok());

  CHECK_FALSE(load_config("", {{"guardrails.max_snapshots", "many"}}, nullptr).ok());
  for (const char* key : {"guardrails.max_volumes", "guardrails.max_snapshots"})
    CHECK_FALSE(load_config("", {{key, "-1"}}, nullptr).ok());
  auto negative = write_temp(R"({"guardrails": {"max_snapshots": -1}})");
  auto n = load_config(negative, {}, nullptr);
  REQUIRE(n.ok());
  CHECK_FALSE(finalize_config(*n, "/usr/bin").ok());
  std::remove(negative.c_str());
}

TEST_CASE("guardrails: the runtime policy allows both by default and comes from every layer, checked") {
  auto d = load_config("", {}, nullptr);
  REQUIRE(d.ok());
  CHECK(d->guardrails.allowed_runtimes == std::vector<std::string>{"runc", "gvisor"});
  REQUIRE(finalize_config(*d, "/usr/bin").ok());

  auto path = write_temp(R"({"guardrails": {"allowed_runtimes": ["gvisor"]}})");
  auto c = load_config(path, {}, nullptr);
  REQUIRE(c.ok());
  CHECK(c->guardrails.allowed_runtimes == std::vector<std::string>{"gvisor"});
  CHECK(finalize_config(*c, "/usr/bin").ok());
  std::remove(path.c_str());
  char env1[] = "SANDFORT_GUARDRAILS_ALLOWED_RUNTIMES=gvisor, runc";
  char* env[] = {env1, nullptr};
  auto e = load_config("", {}, env);
  REQUIRE(e.ok());
  CHECK(e->guardrails.allowed_runtimes == std::vector<std::string>{"gvisor", "runc"});

  // Each of these would refuse every create, or names what no sandbox runs on.
  const auto refused = [](const config_overrides& set, const std::string& why) {
    auto r = load_config("", set, nullptr);
    REQUIRE(r.ok());
    auto checked = finalize_config(*r, "/usr/bin");
    INFO(why);
    REQUIRE_FALSE(checked.ok());
    CHECK_THAT(checked.err().message, Catch::Contains(why));
  };
  refused({{"guardrails.allowed_runtimes", ""}}, "at least one runtime");
  refused({{"guardrails.allowed_runtimes", "runc, kata"}}, "'kata' is not a runtime");
  refused({{"guardrails.allowed_runtimes", "runc, runc"}}, "runc is named twice");
  refused({{"guardrails.allowed_runtimes", "gvisor"}, {"gvisor_runtime", ""}}, "needs gvisor_runtime");
}

TEST_CASE("admission: host memory, the organization's rate and its key cap come from every layer, checked") {
  auto d = load_config("", {}, nullptr);
  REQUIRE(d.ok());
  CHECK(d->host.memory_reserve_mb == 2048);
  CHECK(d->host.memory_overcommit == 1.0);
  CHECK(d->guardrails.max_api_keys == 50);
  CHECK(d->guardrails.rate_limits.org.rate_per_s == 200);
  CHECK(d->guardrails.rate_limits.org.burst == 800);

  auto path = write_temp(R"({"host": {"memory_reserve_mb": 4096, "memory_overcommit": 2.5},
                             "guardrails": {"max_api_keys": 5, "rate_limits": {"org": {"rate_per_s": 3, "burst": 9}}}})");
  char env1[] = "SANDFORT_HOST_MEMORY_OVERCOMMIT=1.5";
  char* env[] = {env1, nullptr};
  auto c = load_config(path, {{"guardrails.rate_limits.org.burst", "10"}}, env);
  REQUIRE(c.ok());
  CHECK(c->host.memory_reserve_mb == 4096);
  CHECK(c->host.memory_overcommit == 1.5);
  CHECK(c->guardrails.max_api_keys == 5);
  CHECK(c->guardrails.rate_limits.org.rate_per_s == 3);
  CHECK(c->guardrails.rate_limits.org.burst == 10);
  REQUIRE(finalize_config(*c, "/usr/bin").ok());
  std::remove(path.c_str());

  for (auto [key, value] : {std::pair{"host.memory_overcommit", "0"}, std::pair{"host.memory_overcommit", "101"},
                            std::pair{"guardrails.max_api_keys", "0"},
                            std::pair{"guardrails.rate_limits.org.burst", "0"}}) {
    auto bad = load_config("", {{key, value}}, nullptr);
    REQUIRE(bad.ok());
    CHECK_FALSE(finalize_config(*bad, "/usr/bin").ok());
  }
  CHECK_FALSE(load_config("", {{"host.memory_reserve_mb", "-1"}}, nullptr).ok());
}

TEST_CASE("egress.upstream_proxy: host:port, credentials together, a password file of mode 0600") {
  auto load = [](const std::string& egress) -> result<config> {
    auto c = load_config(write_temp(R"({"egress": {)" + egress + "}}"), {}, nullptr);
    if (!c.ok()) return c;
    if (auto f = finalize_config(*c, "/usr/bin"); !f.ok()) return std::move(f).err();
    return c;
  };
  auto refused = [&](const std::string& egress, const std::string& expected) {
    auto c = load(egress);
    REQUIRE_FALSE(c.ok());
    CHECK_THAT(c.err().message, Catch::Contains(expected));
  };
  auto password = write_temp("p@ss word-ok\n");
  REQUIRE(::chmod(password.c_str(), 0600) == 0);
  auto c = load(R"("upstream_proxy": "proxy.corp.example:3128", "upstream_proxy_username": "sandfort",
                   "upstream_proxy_password_file": ")" + password + "\"");
  REQUIRE(c.ok());
  CHECK(c->egress.upstream_proxy == "proxy.corp.example:3128");
  CHECK(c->egress.upstream_proxy_username == "sandfort");
  CHECK(c->egress.upstream_proxy_password == "p@ss word-ok");  // the file's newline is no part of it
  auto none = load("");
  REQUIRE(none.ok());
  CHECK(none->egress.upstream_proxy.empty());

  auto group_readable = write_temp("secret");
  REQUIRE(::chmod(group_readable.c_str(), 0640) == 0);
  refused(R"("upstream_proxy": "proxy:3128", "upstream_proxy_username": "u", "upstream_proxy_password_file": ")" +
              group_readable + "\"",
          "mode must be 0600");
  refused(R"("upstream_proxy": "proxy:3128", "upstream_proxy_username": "u", "upstream_proxy_password_file": "/nonexistent")",
          "not a readable file");
  refused(R"("upstream_proxy": "proxy:3128", "upstream_proxy_username": "u")", "go together");
  refused(R"("upstream_proxy_username": "u")", "need upstream_proxy");
  refused(R"("upstream_proxy": "http://proxy:3128")", "HOST:PORT");
  refused(R"("upstream_proxy": "u:p@proxy:3128")", "HOST:PORT");
  refused(R"("upstream_proxy": "proxy")", "HOST:PORT");
  refused(R"("upstream_proxy": "proxy:70000")", "HOST:PORT");
  refused(R"("upstream_proxy": "proxy:3128", "upstream_proxy_username": "a:b", "upstream_proxy_password_file": ")" +
              password + "\"",
          "upstream_proxy_username must be");
}

TEST_CASE("a pool learns between min_size and max_size, how pools refill and shrink is one object") {
  auto path = write_temp(R"({"pools": [{"min_size": 2, "max_size": 24}, {"min_size": 0, "max_size": 4,
      "resources": {"cpus": 2, "memory_mb": 2048, "pids": 100}}], "pool": {"max_parallel": 3, "idle_shrink_s": 30}})");
  auto c = load_config(path, {}, nullptr);
  REQUIRE(c.ok());
  REQUIRE(finalize_config(*c, "/usr/bin").ok());
  CHECK(c->pools[0].min_size == 2);
  CHECK(c->pools[0].max_size == 24);
  CHECK(c->pools[1].min_size == 0);
  CHECK(c->pools[1].max_size == 4);
  CHECK(c->pool.max_parallel == 3);
  CHECK(c->pool.burst_window_s == 60);  // the default
  CHECK(c->pool.idle_shrink_s == 30);

  auto env_set = load_config("", {{"pool.burst_window_s", "10"}}, nullptr);
  REQUIRE(env_set.ok());
  CHECK(env_set->pool.burst_window_s == 10);
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"pool.max_parallel", "0"}, {"pool.max_parallel", "17"}, {"pool.burst_window_s", "0"},
           {"pool.idle_shrink_s", "0"}}) {
    auto bad = load_config("", {{key, value}}, nullptr);
    REQUIRE(bad.ok());
    auto f = finalize_config(*bad, "/usr/bin");
    REQUIRE_FALSE(f.ok());
    CHECK_THAT(f.err().message, Catch::Contains(key));
  }
}
