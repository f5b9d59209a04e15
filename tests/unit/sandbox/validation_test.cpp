// create(): what is refused before anything is stored, the defaults, and the container spec
// handed to the engine.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <functional>

#include "fakes.hpp"
#include "sandfort/crypto/digest.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

struct bad_case {
  const char* what;
  std::function<void(create_request&)> edit;
  const char* field;  // must appear in the message
};

void require_rejected(fixture& f, const bad_case& c) {
  INFO("case: " << c.what);
  create_request req;
  req.wait = true;
  c.edit(req);
  auto v = f.create(f.org_a.id, req);
  REQUIRE_FALSE(v.ok());
  CHECK(v.err().code == errc::invalid_argument);
  INFO("message: " << v.err().message);
  CHECK(v.err().message.find(c.field) != std::string::npos);
}

}  // namespace

TEST_CASE("sandbox: create rejects each bad field with invalid_argument naming it", "[sandbox][validation]") {
  fixture f;
  const std::vector<bad_case> cases = {
      {"name with a space", [](auto& r) { r.name = "my box"; }, "name"},
      {"name like an id", [](auto& r) { r.name = "sbx-mine"; }, "name"},
      {"name starting with a dash", [](auto& r) { r.name = "-x"; }, "name"},
      {"name of 64 characters", [](auto& r) { r.name = std::string(64, 'a'); }, "name"},
      {"snapshot starting with a dash", [](auto& r) { r.snapshot = "-image"; }, "snapshot"},
      {"snapshot with a space", [](auto& r) { r.snapshot = "ubuntu 24.04"; }, "snapshot"},
      {"snapshot on a loopback registry", [](auto& r) { r.snapshot = "127.0.0.1:8080/v1/whoami:latest"; }, "snapshot"},
      {"snapshot on a registry not allowed", [](auto& r) { r.snapshot = "ghcr.io/x/y"; }, "images.allowed_registries"},
      {"env name starting with a digit", [](auto& r) { r.env = {{"1ABC", "x"}}; }, "env"},
      {"env name with a dash", [](auto& r) { r.env = {{"A-B", "x"}}; }, "env"},
      {"env name empty", [](auto& r) { r.env = {{"", "x"}}; }, "env"},
      {"env value with NUL", [](auto& r) { r.env = {{"A", std::string("a\0b", 3)}}; }, "env"},
      {"too many env variables",
       [](auto& r) {
         for (int i = 0; i < 257; ++i) r.env["V" + std::to_string(i)] = "x";
       },
       "env"},
      {"label key with a space", [](auto& r) { r.labels = {{"a b", "x"}}; }, "label"},
      {"label key empty", [](auto& r) { r.labels = {{"", "x"}}; }, "label"},
      {"label value too long", [](auto& r) { r.labels = {{"k", std::string(256, 'v')}}; }, "label"},
      {"cpus zero", [](auto& r) { r.cpus = 0.0; }, "resources.cpus"},
      {"cpus negative", [](auto& r) { r.cpus = -1.0; }, "resources.cpus"},
      {"memory below 64", [](auto& r) { r.memory_mb = 63; }, "resources.memory_mb"},
      {"pids below 16", [](auto& r) { r.pids = 15; }, "resources.pids"},
      {"egress host with a bang", [](auto& r) { r.egress_allowlist = {"example.com", "bad host!"}; },
       "egress_allowlist"},
      {"egress bare star-dot", [](auto& r) { r.egress_allowlist = {"*."}; }, "egress_allowlist"},
      {"ttl zero", [](auto& r) { r.ttl_s = 0; }, "ttl_s"},
      {"ttl over 30 days", [](auto& r) { r.ttl_s = 30LL * 24 * 3600 + 1; }, "ttl_s"},
      {"user with a space", [](auto& r) { r.user = "root user"; }, "user"},
      {"user too long", [](auto& r) { r.user = std::string(65, 'u'); }, "user"},
      {"relative workdir", [](auto& r) { r.workdir = "work"; }, "workdir"},
  };
  for (const auto& c : cases) require_rejected(f, c);

  // Nothing was stored and nothing reached the engine.
  auto rows = store::sandbox_store(*f.db).list_live_sandboxes_all_orgs();
  REQUIRE(rows);
  CHECK(rows->empty());
  CHECK(f.engine.created.empty());
  store::sandbox_filter deleted;
  deleted.state = "deleted";
  auto gone = store::sandbox_store(*f.db).list_sandboxes(f.org_a.id, deleted);
  REQUIRE(gone);
  CHECK(gone->empty());
}

TEST_CASE("sandbox: create rejects resources beyond the configured maximum", "[sandbox][validation]") {
  fixture f;
  const std::vector<bad_case> cases = {
      {"cpus", [](auto& r) { r.cpus = 4.01; }, "resources.cpus"},
      {"memory", [](auto& r) { r.memory_mb = 8193; }, "resources.memory_mb"},
      {"pids", [](auto& r) { r.pids = 4097; }, "resources.pids"},
  };
  for (const auto& c : cases) require_rejected(f, c);

  // A lower maximum in the configuration is honoured, and its value is in the message.
  f.cfg.max_resources.memory_mb = 256;
  create_request req;
  req.memory_mb = 512;
  auto v = f.create(f.org_a.id, req);
  REQUIRE_FALSE(v.ok());
  CHECK(v.err().code == errc::invalid_argument);
  CHECK(v.err().message.find("256") != std::string::npos);
  CHECK(f.engine.created.empty());
}

TEST_CASE("sandbox: create accepts resources exactly at the maximum", "[sandbox][validation]") {
  fixture f;
  create_request req;
  req.cpus = 4.0;
  req.memory_mb = 8192;
  req.pids = 4096;
  auto v = f.create_started(req);
  CHECK(v.spec.limits.cpus == 4.0);
  CHECK(v.spec.limits.memory_mb == 8192);
  CHECK(v.spec.limits.pids == 4096);
  REQUIRE(f.engine.created.size() == 1);
  CHECK(f.engine.created[0].memory_bytes == 8192LL * 1024 * 1024);
}

TEST_CASE("sandbox: create applies the configured default resources", "[sandbox][validation]") {
  fixture f;
  auto v = f.create_started();
  CHECK(v.spec.limits.cpus == 1.5);
  CHECK(v.spec.limits.memory_mb == 768);
  CHECK(v.spec.limits.pids == 300);
  REQUIRE(f.engine.created.size() == 1);
  const auto& c = f.engine.created[0];
  CHECK(c.cpus == 1.5);
  CHECK(c.memory_bytes == 768LL * 1024 * 1024);
  CHECK(c.pids_limit == 300);
  CHECK(c.image == f.engine.image_by_name("sandfort/base:bookworm")->id);  // the default image, by id

  // One field given, the others defaulted.
  create_request req;
  req.pids = 64;
  auto w = f.create_started(req);
  CHECK(w.spec.limits.pids == 64);
  CHECK(w.spec.limits.cpus == 1.5);
  CHECK(w.spec.limits.memory_mb == 768);
}

TEST_CASE("sandbox: create hands the engine the container spec built from the allowlist", "[sandbox][spec]") {
  fixture f;
  ::setenv("SANDFORT_TEST_DAEMON_SECRET", "must-not-leak", 1);
  f.cfg.runtime = "runsc";
  create_request req;
  req.snapshot = "python:3.12-slim";
  req.env = {{"FOO", "bar"}, {"EMPTY", ""}, {"WITH_EQ", "a=b"}};
  req.labels = {{"team", "infra"}};
  req.cpus = 2.0;
  req.memory_mb = 1024;
  req.pids = 128;
  req.user = "1000:1000";
  req.workdir = "/work";
  f.engine.images.insert("python:3.12-slim");
  auto v = f.create_started(req);
  ::unsetenv("SANDFORT_TEST_DAEMON_SECRET");

  REQUIRE(f.engine.created.size() == 1);
  const auto& c = f.engine.created[0];
  // Opaque: neighbours learn container names from Docker's embedded DNS.
  CHECK(c.name.rfind("sandfort-", 0) == 0);
  CHECK(c.name.find(v.id) == std::string::npos);
  CHECK(c.name.size() == std::string("sandfort-").size() + 16);
  CHECK(c.image == f.engine.image_by_name("python:3.12-slim")->id);  // by id: Docker resolves no name
  // The server-side maxima go to the agent as flags (docs/guardrails.md).
  CHECK(c.entrypoint == std::vector<std::string>{"/.sandfort/agent", "--socket", "/run/sandfort/agent.sock",
                                                 "--max-timeout-s", "100", "--default-timeout-s", "42",
                                                 "--output-cap", "12345", "--log-cap", "1048576",
                                                 "--workdir", "/work"});
  CHECK(c.cmd.empty());
  // Exactly the caller's variables, K=V, and the egress proxy's; nothing of the daemon's own.
  REQUIRE(c.env.size() == 9);
  auto has = [&](const std::string& kv) { return std::find(c.env.begin(), c.env.end(), kv) != c.env.end(); };
  CHECK(has("EMPTY="));
  CHECK(has("FOO=bar"));
  CHECK(has("WITH_EQ=a=b"));
  CHECK(has("no_proxy=localhost,127.0.0.1"));
  const std::string proxy_prefix = "HTTP_PROXY=http://" + v.id + ":";
  auto proxy = std::find_if(c.env.begin(), c.env.end(), [&](const auto& kv) { return kv.starts_with(proxy_prefix); });
  REQUIRE(proxy != c.env.end());
  auto at = proxy->find('@');
  REQUIRE(at != std::string::npos);
  CHECK(proxy->substr(at) == "@10.213.0.1:3128");
  // Only the secret's hash is stored.
  std::string secret = proxy->substr(proxy_prefix.size(), at - proxy_prefix.size());
  CHECK(secret.size() == 48);
  auto row = store::sandbox_store(*f.db).find_live_sandbox(v.id);
  REQUIRE(row.ok());
  CHECK(row->proxy_secret_sha256 == sha256_hex(secret));
  CHECK(row->spec_json.find(secret) == std::string::npos);
  // Caller labels stay in the spec; Docker gets only ours.
  CHECK(c.labels == std::map<std::string, std::string>{{"io.sandfort.sandbox", v.id},
                                                       {"io.sandfort.org", f.org_a.id},
                                                       {"io.sandfort.instance", f.db->instance_id()}});
  CHECK_FALSE(f.db->instance_id().empty());
  CHECK(c.hostname == "sandbox");
  CHECK(c.user == "1000:1000");
  CHECK(c.workdir == "/work");
  REQUIRE(c.binds.size() == 1);
  CHECK(c.binds[0].host_path == "/opt/sandfort/libexec/sandfort-agent");
  CHECK(c.binds[0].container_path == "/.sandfort/agent");
  CHECK(c.binds[0].read_only);
  // The agent's socket directory is the container's own tmpfs, never a host path.
  REQUIRE(c.tmpfs.size() == 1);
  CHECK(c.tmpfs[0].container_path == "/run/sandfort");
  CHECK(c.tmpfs[0].size_bytes == 1 << 20);
  CHECK(c.tmpfs[0].inodes == 256);
  CHECK(c.tmpfs[0].mode == 01777);
  CHECK(c.cap_add ==
        std::vector<std::string>{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "NET_BIND_SERVICE"});
  CHECK(c.init);
  CHECK(c.network_mode == "sandfort");
  CHECK(c.dns_options == std::vector<std::string>{"timeout:1", "attempts:1"});
  CHECK(c.runtime == "runsc");
  CHECK(c.stop_timeout_s == 7);
  CHECK(c.cpus == 2.0);
  CHECK(c.memory_bytes == 1024LL * 1024 * 1024);
  CHECK(c.pids_limit == 128);

  // The view keeps what the caller asked for.
  CHECK(v.snapshot == "python:3.12-slim");
  CHECK(v.spec.env == req.env);
  CHECK(v.spec.labels == req.labels);
  CHECK(v.spec.user == "1000:1000");
  CHECK(v.spec.workdir == "/work");
}

TEST_CASE("sandbox: runc_dials_home makes a runc sandbox as a gVisor one is made, on runc's kernel", "[sandbox][spec]") {
  fixture f;
  f.cfg.runc_dials_home = true;
  create_request req;
  auto v = f.create_started(req);
  CHECK(v.spec.runtime == "runc");
  CHECK(v.spec.dials_home);
  REQUIRE(f.engine.created.size() == 1);
  const auto& c = f.engine.created[0];
  CHECK(c.runtime == f.cfg.runtime);  // not runsc
  CHECK(c.network_mode == "none");   // no interface but lo: no bridge, no address, no firewall rules
  CHECK(c.tmpfs.empty());
  auto home = std::find(c.entrypoint.begin(), c.entrypoint.end(), "--home");
  REQUIRE(home != c.entrypoint.end());
  CHECK(*std::next(home) == "/run/sandfort/home/home.sock");
  CHECK(std::find(c.entrypoint.begin(), c.entrypoint.end(), "--socket") == c.entrypoint.end());
  REQUIRE(c.binds.size() == 2);
  CHECK(c.binds[1].host_path == f.cfg.state_dir + "/home/" + v.id);
  CHECK(c.binds[1].container_path == "/run/sandfort/home");
  CHECK(c.binds[1].read_only);
  // The proxy is the agent's, with no credential: the link proves the sandbox.
  CHECK(std::find(c.env.begin(), c.env.end(), "HTTPS_PROXY=http://127.0.0.1:3128") != c.env.end());
  // Fixed when made: the flag is the row's, whatever the daemon's setting later.
  auto row = store::sandbox_store(*f.db).find_live_sandbox(v.id);
  REQUIRE(row.ok());
  f.cfg.runc_dials_home = false;
  CHECK(agent_address_of(*row).dials_home);
  // A row written before the flag existed: gVisor ones dialed home, runc ones did not.
  CHECK(spec_from_json(R"({"runtime":"gvisor"})").dials_home);
  CHECK_FALSE(spec_from_json(R"({"runtime":"runc"})").dials_home);
}

TEST_CASE("sandbox: a gVisor sandbox that names no pids gets the configured maximum", "[sandbox][spec]") {
  // runsc's threads count against it (docs/gvisor.md); a runc one keeps the default.
  fixture f;
  create_request gvisor;
  gvisor.runtime = "gvisor";
  CHECK(f.create_started(gvisor).spec.limits.pids == f.cfg.max_resources.pids);
  CHECK(f.engine.created.back().pids_limit == f.cfg.max_resources.pids);
  gvisor.pids = 128;
  CHECK(f.create_started(gvisor).spec.limits.pids == 128);
  CHECK(f.create_started().spec.limits.pids == f.cfg.default_resources.pids);
}

TEST_CASE("sandbox: a gVisor create on an engine without runsc is refused before anything is made", "[sandbox][spec]") {
  fixture f;
  f.engine.runtime_names = {"runc"};
  create_request req;
  req.runtime = "gvisor";
  req.wait = true;
  auto v = f.create(f.org_a.id, req);
  REQUIRE_FALSE(v.ok());
  CHECK(v.err().code == errc::unavailable);
  CHECK(v.err().message.find("no runtime 'runsc'") != std::string::npos);
  CHECK(f.engine.created.empty());
  CHECK(store::sandbox_store(*f.db).list_live_sandboxes(f.org_a.id)->empty());
  // Registered while sandfortd runs: the next create is made.
  f.engine.runtime_names.push_back("runsc");
  auto made = f.create(f.org_a.id, req);
  REQUIRE(made.ok());
  CHECK(made->spec.runtime == "gvisor");
}

TEST_CASE("sandbox: the proxy environment names one proxy in both spellings, loopback off it", "[sandbox][spec]") {
  // docs/package-managers.md: curl and apt read http_proxy in lower case only, Go and others
  // the upper-case names, pip either: every variable must be there in both spellings.
  auto env = proxy_environment("sbx-1", "s3cret", "10.213.0.1", 3128);
  const std::string url = "http://sbx-1:s3cret@10.213.0.1:3128";
  CHECK(env == std::vector<std::string>{"HTTP_PROXY=" + url, "HTTPS_PROXY=" + url, "http_proxy=" + url,
                                        "https_proxy=" + url, "NO_PROXY=localhost,127.0.0.1",
                                        "no_proxy=localhost,127.0.0.1"});
}

TEST_CASE("sandbox: create accepts the valid edge forms of each field", "[sandbox][validation]") {
  fixture f;
  const std::string pinned =
      "registry.example.com:5000/team/img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  f.cfg.images.allowed_registries = {"registry.example.com:5000"};  // image_policy_test.cpp has the rest
  f.engine.images.insert(pinned);
  create_request req;
  req.name = std::string(63, 'n');
  req.snapshot = pinned;
  req.env = {{"_UNDERSCORE", "v"}, {"A1", "x"}};
  req.labels = {{"example.com/owner", std::string(255, 'v')}};
  req.egress_allowlist = {"*", "*.example.com", "pypi.org"};
  req.ttl_s = 30LL * 24 * 3600;
  req.user = "root";
  auto v = f.create_started(req);
  CHECK(v.state == "started");
  CHECK(v.name == req.name);
  CHECK(v.spec.egress_allowlist == req.egress_allowlist);
  REQUIRE(v.spec.ttl_s);
  CHECK(*v.spec.ttl_s == 30LL * 24 * 3600);
  REQUIRE(v.expires_at);
  CHECK(*v.expires_at == format_time(f.clk.now() + std::chrono::hours(24 * 30)));
}

TEST_CASE("sandbox: create refuses a name already used in the organization", "[sandbox][validation]") {
  fixture f;
  create_request req;
  req.name = "worker";
  f.create_started(req);
  req.wait = true;
  auto again = f.create(f.org_a.id, req);
  REQUIRE_FALSE(again.ok());
  CHECK(again.err().code == errc::conflict);
  // Another organization may use the same name.
  auto other = f.create(f.org_b.id, req);
  REQUIRE(other.ok());
  CHECK(other->state == "started");
}

TEST_CASE("sandbox: secrets on create get a variable and a placeholder each, and trust the CA", "[sandbox][secrets]") {
  config cfg;
  create_request req;
  req.secrets = {{"openai-prod", ""}, {"github", "GITHUB_TOKEN"}};
  auto spec = validate_create(cfg, req);
  REQUIRE(spec.ok());
  REQUIRE(spec->secrets.size() == 2);
  CHECK(spec->secrets[0].env == "OPENAI_PROD");
  CHECK(spec->secrets[1].env == "GITHUB_TOKEN");
  CHECK(spec->secrets[0].placeholder.size() == 37);
  CHECK(spec->secrets[0].placeholder.rfind("sfph_", 0) == 0);
  CHECK(spec->secrets[0].placeholder != spec->secrets[1].placeholder);
  CHECK(spec->trusts_interception_ca);
  // Stored and read back; the environment holds placeholders and the CA variables.
  auto back = spec_from_json(spec_to_json(*spec));
  REQUIRE(back.secrets.size() == 2);
  CHECK(back.secrets[1].placeholder == spec->secrets[1].placeholder);
  CHECK(back.trusts_interception_ca);
  auto env = sandbox_environment("sbx-1", back, "secret", "10.0.0.1", 3128);
  CHECK(env["GITHUB_TOKEN"] == spec->secrets[1].placeholder);
  CHECK(env["SSL_CERT_FILE"] == interception_bundle_path);
  CHECK(env["NODE_EXTRA_CA_CERTS"] == interception_ca_path);

  create_request plain;
  CHECK_FALSE(validate_create(cfg, plain)->trusts_interception_ca);
  create_request rules;
  rules.egress_rules = {{"api.github.com", {"GET"}, {}}};
  CHECK(validate_create(cfg, rules)->trusts_interception_ca);

  for (auto bad : std::vector<std::vector<secret_attachment>>{
           {{"openai", ""}, {"openai", "OTHER"}},
           {{"openai", "HTTPS_PROXY"}},
           {{"openai", "SSL_CERT_FILE"}},
           {{"openai", "1BAD"}},
           {{"Bad Name", ""}},
           {{"a", "X"}, {"b", "X"}},
           std::vector<secret_attachment>(17, {"x", ""})}) {
    create_request r;
    r.secrets = bad;
    auto refused = validate_create(cfg, r);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.err().code == errc::invalid_argument);
  }
  create_request clash;
  clash.env = {{"OPENAI", "mine"}};
  clash.secrets = {{"openai", ""}};
  CHECK_FALSE(validate_create(cfg, clash).ok());
}
