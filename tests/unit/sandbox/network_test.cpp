// The network side of the service over the fakes: the bridge network (created, adopted or
// refused), addresses, disconnect hooks, PATCH and preview links.

#include <catch2/catch.hpp>
#include <map>

#include "fakes.hpp"
#include "sandfort/crypto/digest.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

TEST_CASE("sandbox network: created internal, without inter-container traffic, labelled ours", "[sandbox][network]") {
  fixture f;
  REQUIRE(f.engine.networks.count("sandfort") == 1);
  const auto& net = f.engine.networks["sandfort"];
  CHECK(net.subnet == "10.213.0.0/16");
  CHECK(net.gateway == "10.213.0.1");
  CHECK(net.bridge == "sandfort0");
  CHECK(net.labels.at(label_network) == "1");
  CHECK(net.labels.at(label_instance) == f.db->instance_id());

  // A second run adopts it rather than failing on the name.
  service again(f.ioc.get_executor(), f.cfg, *f.db, f.engine, f.agent, f.clk, *f.events);
  auto adopted = f.run(again.network().prepare());
  REQUIRE(adopted.ok());
  CHECK(adopted->id == net.id);
  CHECK(f.engine.networks.size() == 1);
}

TEST_CASE("sandbox network: a network of that name that is not ours or not safe is refused", "[sandbox][network]") {
  fixture f;
  service other(f.ioc.get_executor(), f.cfg, *f.db, f.engine, f.agent, f.clk, *f.events);
  auto& net = f.engine.networks["sandfort"];

  net.inter_container = true;
  auto chatty = f.run(other.network().prepare());
  REQUIRE_FALSE(chatty.ok());
  CHECK(chatty.err().code == errc::conflict);
  CHECK(chatty.err().message.find("docker network rm sandfort") != std::string::npos);

  net.inter_container = false;
  net.internal = false;
  CHECK_FALSE(f.run(other.network().prepare()).ok());

  net.internal = true;
  net.labels.clear();
  auto foreign = f.run(other.network().prepare());
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.err().message.find("did not create it") != std::string::npos);

  // Without a network no sandbox can be created.
  create_request req;
  auto refused = f.run(other.create(f.org_a.id, req));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::unavailable);
}

TEST_CASE("sandbox network: the address is recorded while started, stop and delete disconnect", "[sandbox][network]") {
  fixture f;
  std::vector<std::string> disconnected;
  f.svc->network().on_disconnect([&](const std::string& id) { disconnected.push_back(id); });
  auto v = f.create_started();
  auto row = store::sandbox_store(*f.db).find_live_sandbox(v.id);
  REQUIRE(row.ok());
  CHECK(row->address.rfind("10.213.0.", 0) == 0);

  REQUIRE(f.run(f.svc->stop(f.org_a.id, v.id)).ok());
  CHECK(store::sandbox_store(*f.db).find_live_sandbox(v.id)->address.empty());
  CHECK(disconnected == std::vector<std::string>{v.id});

  REQUIRE(f.run(f.svc->start(f.org_a.id, v.id)).ok());
  CHECK_FALSE(store::sandbox_store(*f.db).find_live_sandbox(v.id)->address.empty());

  REQUIRE(f.run(f.svc->remove(f.org_a.id, v.id)).ok());
  CHECK(disconnected == std::vector<std::string>{v.id, v.id});
  CHECK_FALSE(store::sandbox_store(*f.db).find_live_sandbox(v.id).ok());
}

TEST_CASE("sandbox network: PATCH changes the allowlist, labels and TTL and nothing else", "[sandbox][network]") {
  fixture f;
  create_request req;
  req.egress_allowlist = {"example.com"};
  req.labels = {{"team", "a"}};
  auto v = f.create_started(req);

  update_request up;
  up.egress_allowlist = std::vector<std::string>{"*.pypi.org", "files.pythonhosted.org"};
  auto changed = f.run(f.svc->update(f.org_a.id, v.id, up));
  REQUIRE(changed.ok());
  CHECK(changed->spec.egress_allowlist == *up.egress_allowlist);
  CHECK(changed->spec.labels == req.labels);
  CHECK(changed->state == "started");
  CHECK(f.get(f.org_a.id, v.id)->spec.egress_allowlist == *up.egress_allowlist);

  update_request clear;
  clear.egress_allowlist = std::vector<std::string>{};
  clear.labels = std::map<std::string, std::string>{};
  clear.ttl_s = 60;
  auto cleared = f.run(f.svc->update(f.org_a.id, v.id, clear));
  REQUIRE(cleared.ok());
  CHECK(cleared->spec.egress_allowlist.empty());
  CHECK(cleared->spec.labels.empty());
  CHECK(cleared->expires_at.has_value());

  update_request bad;
  bad.egress_allowlist = std::vector<std::string>{"exa mple.com"};
  auto refused = f.run(f.svc->update(f.org_a.id, v.id, bad));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::invalid_argument);
  CHECK(f.get(f.org_a.id, v.id)->spec.egress_allowlist.empty());

  auto other_org = f.run(f.svc->update(f.org_b.id, v.id, up));
  REQUIRE_FALSE(other_org.ok());
  CHECK(other_org.err().code == errc::not_found);
}

TEST_CASE("sandbox network: preview links carry a per-port token unless previews are public", "[sandbox][network]") {
  fixture f;
  auto v = f.create_started();
  CHECK(v.preview_url_template == "http://{port}-" + v.id + ".preview.localhost:8081");
  auto link = f.svc->network().preview(f.org_a.id, v.id, 8080);
  REQUIRE(link.ok());
  CHECK(link->url == "http://8080-" + v.id + ".preview.localhost:8081");
  auto key = store::sandbox_store(*f.db).find_live_sandbox(v.id)->preview_key;
  CHECK(link->token == hmac_sha256_hex(key, v.id + ":8080"));
  CHECK(f.svc->network().preview(f.org_a.id, v.id, 8081)->token != link->token);
  CHECK_FALSE(f.svc->network().preview(f.org_a.id, v.id, 0).ok());
  CHECK_FALSE(f.svc->network().preview(f.org_a.id, v.id, 65536).ok());
  CHECK(f.svc->network().preview(f.org_b.id, v.id, 8080).err().code == errc::not_found);

  create_request open;
  open.public_preview = true;
  auto pub = f.create_started(open);
  CHECK(f.svc->network().preview(f.org_a.id, pub.id, 3000)->token.empty());
}

TEST_CASE("sandbox network: ports come with their preview URLs", "[sandbox][network]") {
  fixture f;
  auto v = f.create_started();
  auto ports = f.run(f.svc->network().ports(f.org_a.id, v.id));
  REQUIRE(ports.ok());
  REQUIRE(ports->size() == 2);
  CHECK((*ports)[0].url == "http://8080-" + v.id + ".preview.localhost:8081");
  CHECK((*ports)[0].previewable);
  CHECK((*ports)[1].url == "http://5432-" + v.id + ".preview.localhost:8081");
  CHECK_FALSE((*ports)[1].previewable);
  CHECK(f.run(f.svc->network().ports(f.org_b.id, v.id)).err().code == errc::not_found);
  REQUIRE(f.run(f.svc->stop(f.org_a.id, v.id)).ok());
  CHECK(f.run(f.svc->network().ports(f.org_a.id, v.id)).err().code == errc::conflict);
}

TEST_CASE("sandbox network: Docker's resolver is not listed, previewable means the preview reaches it",
          "[sandbox][network]") {
  fixture f;
  auto v = f.create_started();
  const std::string own = store::sandbox_store(*f.db).find_live_sandbox(v.id)->address;
  REQUIRE_FALSE(own.empty());
  f.agent.listening = {{53001, "127.0.0.11", "ipv4", std::nullopt, std::nullopt, "", false},
                       {53001, "::ffff:127.0.0.11", "ipv6", std::nullopt, std::nullopt, "", false},
                       {3000, own, "ipv4", 9, "node", "", false},
                       {3001, "::ffff:" + own, "ipv6", 9, "node", "", false},
                       {3002, "::", "ipv6", 9, "node", "", false},
                       {5173, "127.0.0.1", "ipv4", 9, "node", "", false},
                       {5174, "::1", "ipv6", 9, "node", "", false},
                       {5175, "127.0.0.2", "ipv4", 9, "node", "", false},
                       {6000, "10.99.0.7", "ipv4", 9, "node", "", false}};
  auto ports = f.run(f.svc->network().ports(f.org_a.id, v.id));
  REQUIRE(ports.ok());
  std::map<int, bool> previewable;
  for (const auto& p : *ports) previewable[p.port] = p.previewable;
  CHECK(previewable == std::map<int, bool>{{3000, true}, {3001, true}, {3002, true}, {5173, false},
                                           {5174, false}, {5175, false}, {6000, false}});
}

TEST_CASE("sandbox network: metrics join Docker's sample and the proxy's byte counts", "[sandbox][network]") {
  fixture f;
  auto v = f.create_started();
  std::vector<std::string> asked;
  f.svc->set_egress_meter([&](const std::string& id) {
    asked.push_back(id);
    return egress_traffic{1000, 200, 4, 2};
  });
  auto m = f.run(f.svc->metrics(f.org_a.id, v.id));
  REQUIRE(m.ok());
  CHECK(m->cpu_percent == 12.5);
  CHECK(m->memory_bytes == 64 << 20);
  CHECK(m->memory_limit_bytes == 1024 << 20);
  CHECK(m->pids == 3);
  CHECK(m->egress_bytes_in == 1000);
  CHECK(m->egress_bytes_out == 200);
  CHECK(m->egress_allowed == 4);
  CHECK(m->egress_denied == 2);
  CHECK(asked == std::vector<std::string>{v.id});
  CHECK(f.run(f.svc->metrics(f.org_b.id, v.id)).err().code == errc::not_found);
}
