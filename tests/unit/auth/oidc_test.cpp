// The OIDC verifier over a real SQLite store, real keys and signatures, an injected clock, and
// an issuer served from memory (the url_fetcher seam) so that fetches can be counted, delayed
// and failed. The real provider is exercised in tests/integration/test_oidc.py.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <map>

#include "../store/open_db.hpp"
#include "../store/temp_dir.hpp"
#include "jwt_support.hpp"
#include "sandfort/auth/oidc.hpp"
#include "support/manual_clock.hpp"

using namespace sandfort;
using namespace sandfort::auth;
using namespace sandfort::testing::jwt_support;
using nlohmann::json;
namespace asio = boost::asio;

namespace {

constexpr const char* iss = "https://idp.example.test/realms/eng";

// An issuer in memory: documents by URL, a count of requests, a switch to fail, a delay.
struct fake_issuer {
  std::map<std::string, std::string> docs;
  std::map<std::string, std::string> cache_control;
  std::map<std::string, int> requests;
  bool down = false;
  std::chrono::milliseconds delay{0};

  url_fetcher fetcher() {
    return [this](std::string url, const oidc_issuer_config&) -> asio::awaitable<result<http::response>> {
      ++requests[url];
      if (delay.count() > 0) {
        asio::steady_timer t(co_await asio::this_coro::executor, delay);
        co_await t.async_wait(asio::use_awaitable);
      }
      if (down) co_return make_error(errc::unavailable, "connection refused");
      http::response res{http::bhttp::status::ok, 11};
      auto it = docs.find(url);
      if (it == docs.end()) res.result(http::bhttp::status::not_found);
      else res.body() = it->second;
      if (auto cc = cache_control.find(url); cc != cache_control.end())
        res.set(http::bhttp::field::cache_control, cc->second);
      res.prepare_payload();
      co_return res;
    };
  }
  int jwks_requests() { return requests[std::string(iss) + "/keys"]; }
};

struct verifier_fixture {
  testing::temp_dir dir;
  std::unique_ptr<store::database> db = testing::open_db(dir.file("sandfort.db"));
  testing::manual_clock clk;
  fake_issuer idp;
  oidc_config cfg;
  pkey_ptr key1 = rsa_key(2048);
  pkey_ptr key2 = rsa_key(2048);
  std::unique_ptr<oidc_verifier> verifier;

  verifier_fixture() {
    REQUIRE(store::org_store(*db).create_org("acme", false, format_time(clk.now())));
    oidc_issuer_config is;
    is.issuer = iss;
    is.audiences = {"sandfort"};
    is.org_claim = "tenant.name";
    is.role_map = {{"admins", "admin"}, {"devs", "member"}, {"readers", "viewer"}};
    cfg.issuers.push_back(is);
    cfg.jwks_min_refresh_s = 30;
    cfg.jwks_default_cache_s = 300;
    idp.docs[std::string(iss) + "/.well-known/openid-configuration"] =
        json{{"issuer", iss}, {"jwks_uri", std::string(iss) + "/keys"}}.dump();
    publish({rsa_jwk(key1, "k1")});
    verifier = std::make_unique<oidc_verifier>(cfg, *db, clk, idp.fetcher());
  }
  void publish(const std::vector<json>& keys) { idp.docs[std::string(iss) + "/keys"] = json{{"keys", keys}}.dump(); }

  std::string token(const pkey_ptr& k, const std::string& kid, json claims_patch = json::object()) {
    const long long issued_s = std::chrono::duration_cast<std::chrono::seconds>(clk.now().time_since_epoch()).count();
    json claims = {{"iss", iss},   {"aud", "sandfort"}, {"sub", "user-1"},       {"exp", issued_s + 600},
                   {"iat", issued_s}, {"email", "u@x"},    {"tenant", {{"name", "acme"}}}, {"groups", {"devs"}}};
    claims.merge_patch(claims_patch);
    return compact_raw(json{{"alg", "RS256"}, {"kid", kid}}.dump(), claims.dump(), rs256_with(k));
  }

  template <typename T>
  T run(asio::awaitable<T> a) {
    asio::io_context ioc;
    std::optional<T> out;
    asio::co_spawn(
        ioc, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(a)); },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
    ioc.run();
    REQUIRE(out);
    return std::move(*out);
  }
  result<principal> auth(const std::string& t) { return run(verifier->authenticate(t, "req-test")); }
};

}  // namespace

TEST_CASE("a token verifies through discovery and the issuer's keys, and maps to organization and role") {
  verifier_fixture f;
  auto p = f.auth(f.token(f.key1, "k1", {{"groups", {"readers", "admins", "unknown"}}}));
  REQUIRE(p);
  CHECK(p->org_name == "acme");
  CHECK(p->granted == role::admin);  // the highest match wins
  CHECK(p->via == method::oidc);
  CHECK(p->id == "user-1");
  CHECK(p->name == "u@x");
  CHECK(p->issuer == iss);
  CHECK(f.idp.jwks_requests() == 1);
  // Cached: the next token costs no fetch.
  REQUIRE(f.auth(f.token(f.key1, "k1")));
  CHECK(f.idp.jwks_requests() == 1);
  CHECK(f.verifier->jwks_fetches() == 1);
}

TEST_CASE("claims that name no organization or grant no role are refused") {
  verifier_fixture f;
  auto missing_org = f.auth(f.token(f.key1, "k1", {{"tenant", {{"name", "nobody"}}}}));
  REQUIRE_FALSE(missing_org);
  CHECK(missing_org.err().code == errc::unauthenticated);
  CHECK(missing_org.err().message == "invalid token");
  auto no_role = f.auth(f.token(f.key1, "k1", {{"groups", {"outsiders"}}}));
  REQUIRE_FALSE(no_role);
  CHECK(no_role.err().code == errc::permission_denied);
  REQUIRE(store::org_store(*f.db).set_org_state(store::org_store(*f.db).find_org_by_name("acme")->id, "disabled",
                                                {"active"}, "t"));
  auto disabled = f.auth(f.token(f.key1, "k1"));
  REQUIRE_FALSE(disabled);
  CHECK(disabled.err().code == errc::permission_denied);
}

TEST_CASE("a forged or foreign token is refused without a reason in the answer") {
  verifier_fixture f;
  auto attacker = rsa_key(2048);
  for (const auto& t : {f.token(attacker, "k1"),                                    // wrong signature
                        f.token(f.key1, "k1", {{"iss", "https://evil.example"}}),   // unknown issuer
                        f.token(f.key1, "k1", {{"aud", "other"}}),                  // not for us
                        f.token(f.key1, "k1", {{"exp", 1000}}),                     // long expired
                        std::string(20000, 'a')}) {                                 // over the cap
    auto r = f.auth(t);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::unauthenticated);
    CHECK(r.err().message == "invalid token");
  }
}

TEST_CASE("a flood of unknown kids costs one fetch per interval, rotation is picked up") {
  verifier_fixture f;
  REQUIRE(f.auth(f.token(f.key1, "k1")));
  CHECK(f.idp.jwks_requests() == 1);
  f.clk.advance(std::chrono::seconds(31));
  for (int i = 0; i < 100; ++i) CHECK_FALSE(f.auth(f.token(f.key2, "forged-" + std::to_string(i))));
  CHECK(f.idp.jwks_requests() == 2);  // the first unknown kid asked; the other 99 did not

  // The issuer rotates to k2; within the interval its tokens are still unknown...
  f.publish({rsa_jwk(f.key2, "k2"), rsa_jwk(f.key1, "k1")});
  CHECK_FALSE(f.auth(f.token(f.key2, "k2")));
  CHECK(f.idp.jwks_requests() == 2);
  // ...and once the interval has passed, the first one fetches the new set.
  f.clk.advance(std::chrono::seconds(30));
  REQUIRE(f.auth(f.token(f.key2, "k2")));
  CHECK(f.idp.jwks_requests() == 3);
  REQUIRE(f.auth(f.token(f.key1, "k1")));
}

TEST_CASE("an issuer that cannot be reached fails closed with idp_unavailable, retried once per interval") {
  verifier_fixture f;
  f.idp.down = true;
  auto r = f.auth(f.token(f.key1, "k1"));
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::idp_unavailable);
  const int asked = f.idp.requests[std::string(iss) + "/.well-known/openid-configuration"];
  CHECK(asked == 1);
  CHECK(f.auth(f.token(f.key1, "k1")).err().code == errc::idp_unavailable);
  CHECK(f.idp.requests[std::string(iss) + "/.well-known/openid-configuration"] == asked);  // not retried yet

  f.idp.down = false;
  f.clk.advance(std::chrono::seconds(30));
  REQUIRE(f.auth(f.token(f.key1, "k1")));

  // A key set past its lifetime is not trusted when it cannot be renewed.
  f.clk.advance(std::chrono::seconds(301));
  f.idp.down = true;
  auto stale = f.auth(f.token(f.key1, "k1"));
  REQUIRE_FALSE(stale);
  CHECK(stale.err().code == errc::idp_unavailable);
}

TEST_CASE("Cache-Control max-age sets the key set's lifetime, within the configured bounds") {
  verifier_fixture f;
  f.idp.cache_control[std::string(iss) + "/keys"] = "public, max-age=1000";
  REQUIRE(f.auth(f.token(f.key1, "k1")));
  f.clk.advance(std::chrono::seconds(900));
  REQUIRE(f.auth(f.token(f.key1, "k1")));
  CHECK(f.idp.jwks_requests() == 1);
  f.clk.advance(std::chrono::seconds(101));
  REQUIRE(f.auth(f.token(f.key1, "k1")));
  CHECK(f.idp.jwks_requests() == 2);
}

TEST_CASE("concurrent first tokens share one fetch") {
  verifier_fixture f;
  f.idp.delay = std::chrono::milliseconds(50);
  asio::io_context ioc;
  int ok = 0;
  for (int i = 0; i < 10; ++i)
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          if (co_await f.verifier->authenticate(f.token(f.key1, "k1"), "req")) ++ok;
        },
        asio::detached);
  ioc.run();
  CHECK(ok == 10);
  CHECK(f.idp.jwks_requests() == 1);
}

TEST_CASE("a discovery document for another issuer is not believed") {
  verifier_fixture f;
  f.idp.docs[std::string(iss) + "/.well-known/openid-configuration"] =
      json{{"issuer", "https://evil.example"}, {"jwks_uri", "https://evil.example/keys"}}.dump();
  auto r = f.auth(f.token(f.key1, "k1"));
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::idp_unavailable);
  CHECK(f.idp.requests.count("https://evil.example/keys") == 0);
}
