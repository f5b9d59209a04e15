// The console's sign-in through an identity provider (auth/console_login.hpp) over a real SQLite
// store, real keys and signatures, an injected clock, and a provider served from memory: its
// discovery document and keys (the url_fetcher seam) and its token endpoint (the form_poster
// seam), which answers with tokens the test signs. The real provider drives the same flow in
// tests/integration/test_console_oidc.py.
#include <catch2/catch.hpp>
#include <map>

#include "../store/open_db.hpp"
#include "../store/temp_dir.hpp"
#include "jwt_support.hpp"
#include "sandfort/auth/code_flow.hpp"
#include "sandfort/auth/console_login.hpp"
#include "sandfort/auth/console_sessions.hpp"
#include "sandfort/crypto/digest.hpp"
#include "sandfort/store/console_session_store.hpp"
#include "sandfort/store/org_store.hpp"
#include "support/manual_clock.hpp"
#include "support/run_coroutine.hpp"

using namespace sandfort;
using namespace sandfort::auth;
using namespace sandfort::testing::jwt_support;
using nlohmann::json;
namespace asio = boost::asio;

namespace {

constexpr const char* idp_iss = "https://idp.example.test";
constexpr const char* console_client = "sandfort-console";
constexpr const char* callback_uri = "https://sandfort.example.com/v1/console/oidc/callback";

// What the provider's token endpoint was sent, and what it answers next.
struct fake_token_endpoint {
  int requests = 0;
  std::string url, form, authorization;
  int status = 200;
  json answer;
  bool down = false;
};

struct login_fixture {
  testing::temp_dir dir;
  std::unique_ptr<store::database> db = testing::open_db(dir.file("sandfort.db"));
  testing::manual_clock clk;
  std::map<std::string, std::string> docs;
  std::map<std::string, int> asked;  // how many times each URL was fetched
  fake_token_endpoint tokens;
  oidc_config cfg;
  pkey_ptr key = rsa_key(2048);
  std::unique_ptr<oidc_verifier> verifier;
  std::unique_ptr<console_login> login;
  json discovery = {{"issuer", idp_iss},
                    {"jwks_uri", std::string(idp_iss) + "/jwks"},
                    {"authorization_endpoint", std::string(idp_iss) + "/authorize?tenant=t1"},
                    {"token_endpoint", std::string(idp_iss) + "/token"},
                    {"code_challenge_methods_supported", {"S256"}},
                    {"authorization_response_iss_parameter_supported", true}};

  explicit login_fixture(console_login_limits limits = {}) {
    for (const char* name : {"acme", "other-org"})
      REQUIRE(store::org_store(*db).create_org(name, false, format_time(clk.now())));
    oidc_issuer_config is;
    is.issuer = idp_iss;
    is.audiences = {"sandfort"};
    is.org_claim = "org";
    is.role_map = {{"admins", "admin"}, {"devs", "member"}};
    is.console_client_id = console_client;
    is.console_client_secret = "s3cret";
    is.console_name = "Example IdP";
    cfg.issuers.push_back(is);
    docs[std::string(idp_iss) + "/.well-known/openid-configuration"] = discovery.dump();
    docs[std::string(idp_iss) + "/jwks"] = json{{"keys", {rsa_jwk(key, "k1")}}}.dump();
    url_fetcher fetch = [this](std::string url, const oidc_issuer_config&) -> asio::awaitable<result<http::response>> {
      ++asked[url];
      http::response res{http::bhttp::status::ok, 11};
      auto it = docs.find(url);
      if (it == docs.end()) res.result(http::bhttp::status::not_found);
      else res.body() = it->second;
      res.prepare_payload();
      co_return res;
    };
    form_poster post = [this](std::string url, std::string form, std::string authorization,
                              const oidc_issuer_config&) -> asio::awaitable<result<http::response>> {
      ++tokens.requests;
      tokens.url = url;
      tokens.form = form;
      tokens.authorization = authorization;
      if (tokens.down) co_return make_error(errc::unavailable, "connection refused");
      http::response res{static_cast<http::bhttp::status>(tokens.status), 11};
      res.body() = tokens.answer.dump();
      res.prepare_payload();
      co_return res;
    };
    verifier = std::make_unique<oidc_verifier>(cfg, *db, clk, fetch);
    login = std::make_unique<console_login>(cfg, *verifier, *db, clk, post, limits);
  }

  long long now_s() const {
    return std::chrono::duration_cast<std::chrono::seconds>(clk.now().time_since_epoch()).count();
  }
  std::string sign(json claims) { return compact_raw(json{{"alg", "RS256"}, {"kid", "k1"}}.dump(), claims.dump(), rs256_with(key)); }
  // The provider's answer to a good code: an access token for Sandfort and an ID token for the client.
  void answer_with(const std::string& nonce, json access_patch = json::object(), json id_patch = json::object()) {
    json access = {{"iss", idp_iss}, {"aud", "sandfort"}, {"sub", "alice"}, {"exp", now_s() + 600},
                   {"iat", now_s()}, {"org", "acme"},  {"groups", {"devs"}}, {"email", "alice@example.test"}};
    access.merge_patch(access_patch);
    json id = {{"iss", idp_iss}, {"aud", console_client}, {"sub", "alice"}, {"exp", now_s() + 600}, {"iat", now_s()}, {"nonce", nonce}};
    id.merge_patch(id_patch);
    tokens.answer = {{"access_token", sign(access)}, {"token_type", "Bearer"}, {"id_token", sign(id)}, {"expires_in", 600}};
  }

  struct begun {
    login_redirect redirect;
    std::map<std::string, std::string> query;  // of the authorization request
  };
  begun start(const std::string& source = "192.0.2.1") {
    auto r = testing::run_coroutine(login->start(code_flow::issuer_key(idp_iss), callback_uri, source, "req-start"));
    REQUIRE(r);
    begun b{*r, {}};
    std::string path;
    http::split_target(r->location.substr(std::string(idp_iss).size()), path, b.query);
    CHECK(path == "/authorize");
    return b;
  }
  result<proven_identity> finish(const begun& b, const std::string& browser, std::string code = "the-code",
                                 std::string error = {}, std::string iss_param = idp_iss) {
    login_callback cb{b.query.at("state"), std::move(code), std::move(error), std::move(iss_param), browser};
    return testing::run_coroutine(login->finish(cb, "req-callback"));
  }
};

void check_login_refused(const result<proven_identity>& r, const std::string& code) {
  REQUIRE_FALSE(r);
  CHECK(r.err().message == code);
}

}  // namespace

TEST_CASE("console login: start sends the browser to the provider with PKCE, finish proves the user",
          "[auth][console_login]") {
  login_fixture f;
  REQUIRE(f.login->issuers().size() == 1);
  CHECK(f.login->issuers()[0].id == code_flow::issuer_key(idp_iss));
  CHECK(f.login->issuers()[0].name == "Example IdP");

  auto b = f.start();
  CHECK(b.query.at("tenant") == "t1");  // the endpoint's own query is kept
  CHECK(b.query.at("response_type") == "code");
  CHECK(b.query.at("client_id") == console_client);
  CHECK(b.query.at("redirect_uri") == callback_uri);
  CHECK(b.query.at("scope") == "openid");
  CHECK(b.query.at("code_challenge_method") == "S256");
  CHECK(b.query.at("state").size() == 64);
  CHECK(b.query.at("nonce").size() == 32);
  CHECK(b.redirect.browser_secret.size() == 64);
  // Only hashes of the state and of the browser's cookie are stored; the row says where it goes back to.
  auto row = store::console_session_store(*f.db).take_pending_login(sha256_hex(b.query.at("state")));
  REQUIRE(row);
  CHECK(row->browser_sha256 == sha256_hex(b.redirect.browser_secret));
  CHECK(row->redirect_uri == callback_uri);
  CHECK(row->source == "192.0.2.1");
  CHECK(code_flow::pkce_challenge(row->code_verifier) == b.query.at("code_challenge"));
  REQUIRE(store::console_session_store(*f.db).add_pending_login(sha256_hex(b.query.at("state")), *row, 20));

  f.answer_with(b.query.at("nonce"));
  auto proven = f.finish(b, b.redirect.browser_secret);
  REQUIRE(proven);
  CHECK(proven->who.via == method::oidc);
  CHECK(proven->who.issuer == idp_iss);
  CHECK(proven->who.id == "alice");
  CHECK(proven->who.org_name == "acme");
  CHECK(proven->who.granted == role::member);
  CHECK(proven->expires_at == f.clk.now() + std::chrono::seconds(600));
  // The token request: the code, the same redirect URI, the verifier, the client's Basic credentials.
  CHECK(f.tokens.url == std::string(idp_iss) + "/token");
  std::map<std::string, std::string> form;
  std::string ignored;
  http::split_target("/?" + f.tokens.form, ignored, form);
  CHECK(form.at("grant_type") == "authorization_code");
  CHECK(form.at("code") == "the-code");
  CHECK(form.at("redirect_uri") == callback_uri);
  CHECK(code_flow::pkce_challenge(form.at("code_verifier")) == b.query.at("code_challenge"));
  CHECK(form.count("client_secret") == 0);
  CHECK(f.tokens.authorization == code_flow::basic_credentials(console_client, "s3cret"));
}

TEST_CASE("console login: a state is good once, for the browser that began it, for five minutes",
          "[auth][console_login]") {
  login_fixture f;
  SECTION("replayed") {
    auto b = f.start();
    f.answer_with(b.query.at("nonce"));
    REQUIRE(f.finish(b, b.redirect.browser_secret));
    check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::expired);
    CHECK(f.tokens.requests == 1);
  }
  SECTION("without the pre-login cookie, or with another browser's: refused, and the state is spent") {
    auto b = f.start();
    auto other = f.start();
    f.answer_with(b.query.at("nonce"));
    check_login_refused(f.finish(b, ""), login_error::wrong_browser);
    auto again = f.start();
    check_login_refused(f.finish(again, other.redirect.browser_secret), login_error::wrong_browser);
    check_login_refused(f.finish(again, again.redirect.browser_secret), login_error::expired);
    CHECK(f.tokens.requests == 0);  // the code was never redeemed
  }
  SECTION("after five minutes") {
    auto b = f.start();
    f.answer_with(b.query.at("nonce"));
    f.clk.advance(std::chrono::seconds(300));
    check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::expired);
  }
  SECTION("a state that is not ours") {
    auto b = f.start();
    b.query["state"] = std::string(64, 'a');
    check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::expired);
    b.query["state"] = "x";
    check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::bad_callback);
  }
}

TEST_CASE("console login: the provider's refusal, another issuer's answer, a bad code", "[auth][console_login]") {
  login_fixture f;
  auto b = f.start();
  check_login_refused(f.finish(b, b.redirect.browser_secret, "", "access_denied"), login_error::cancelled);
  b = f.start();
  check_login_refused(f.finish(b, b.redirect.browser_secret, "", "server_error"), login_error::provider_error);
  // RFC 9207: the provider says it names itself, so an answer naming another, or none, is a mix-up.
  b = f.start();
  check_login_refused(f.finish(b, b.redirect.browser_secret, "c", "", "https://evil.example"), login_error::issuer_mismatch);
  b = f.start();
  check_login_refused(f.finish(b, b.redirect.browser_secret, "c", "", ""), login_error::issuer_mismatch);
  b = f.start();
  check_login_refused(f.finish(b, b.redirect.browser_secret, ""), login_error::bad_callback);
  CHECK(f.tokens.requests == 0);
  // The token endpoint refuses the code, or cannot be reached.
  b = f.start();
  f.tokens.status = 400;
  f.tokens.answer = {{"error", "invalid_grant"}, {"error_description", "<script>x</script>"}};
  check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::token_exchange);
  b = f.start();
  f.tokens.down = true;
  check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::provider_unavailable);
}

TEST_CASE("console login: the tokens are checked: the ID token's nonce and audience, the access token as a bearer's",
          "[auth][console_login]") {
  login_fixture f;
  auto b = f.start();
  f.answer_with("another sign-in's nonce");
  check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::token_refused);
  b = f.start();
  f.answer_with(b.query.at("nonce"), json::object(), {{"aud", "another-client"}});
  check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::token_refused);
  b = f.start();
  f.answer_with(b.query.at("nonce"), {{"aud", "another-api"}});
  check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::token_refused);
  b = f.start();
  f.answer_with(b.query.at("nonce"), {{"groups", json::array()}});
  check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::no_access);
  b = f.start();
  f.answer_with(b.query.at("nonce"));
  f.tokens.answer.erase("id_token");
  check_login_refused(f.finish(b, b.redirect.browser_secret), login_error::token_refused);
  // Another organization's mapping lands in that organization.
  b = f.start();
  f.answer_with(b.query.at("nonce"), {{"org", "other-org"}, {"groups", {"admins"}}});
  auto proven = f.finish(b, b.redirect.browser_secret);
  REQUIRE(proven);
  CHECK(proven->who.org_name == "other-org");
  CHECK(proven->who.granted == role::admin);
}

TEST_CASE("console login: an unknown issuer is a bad request, sign-ins under way are bounded per address and in all",
          "[auth][console_login]") {
  login_fixture f(console_login_limits{std::chrono::seconds(300), 3, 5});
  auto unknown = testing::run_coroutine(f.login->start("ffffffffffffffff", callback_uri, "192.0.2.1", "req"));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.err().code == errc::invalid_argument);
  // One address: its oldest end, so the person who clicks four times still signs in with the last.
  std::vector<login_fixture::begun> mine;
  for (int i = 0; i < 4; ++i) {
    mine.push_back(f.start("192.0.2.1"));
    f.clk.advance(std::chrono::milliseconds(10));
  }
  store::console_session_store rows(*f.db);
  CHECK(*rows.count_pending_logins(format_time(f.clk.now())) == 3);
  f.answer_with(mine[3].query.at("nonce"));
  REQUIRE(f.finish(mine[3], mine[3].redirect.browser_secret));
  check_login_refused(f.finish(mine[0], mine[0].redirect.browser_secret), login_error::expired);
  // In all: beyond the total, a start is refused until some end or expire.
  f.start("192.0.2.2");
  f.start("192.0.2.3");
  f.start("192.0.2.4");
  auto busy = testing::run_coroutine(f.login->start(code_flow::issuer_key(idp_iss), callback_uri, "192.0.2.5", "req"));
  REQUIRE_FALSE(busy);
  CHECK(busy.err().message == login_error::busy);
  f.clk.advance(std::chrono::seconds(301));
  CHECK(*rows.prune_pending_logins(format_time(f.clk.now()), 100) == 5);
  f.start("192.0.2.5");
}

TEST_CASE("console login: the discovery document must name this issuer and offer S256", "[auth][console_login]") {
  login_fixture f;
  SECTION("another issuer's document") { f.discovery["issuer"] = "https://evil.example"; }
  SECTION("no S256") { f.discovery["code_challenge_methods_supported"] = {"plain"}; }
  SECTION("a plain-http endpoint elsewhere") { f.discovery["token_endpoint"] = "http://idp.example.test/token"; }
  f.docs[std::string(idp_iss) + "/.well-known/openid-configuration"] = f.discovery.dump();
  auto r = testing::run_coroutine(f.login->start(code_flow::issuer_key(idp_iss), callback_uri, "192.0.2.1", "req"));
  REQUIRE_FALSE(r);
  CHECK(r.err().message == login_error::provider_unavailable);
}

TEST_CASE("console login: one discovery fetch serves sign-ins and token checks, a failing provider is asked once "
          "per jwks_min_refresh_s",
          "[auth][console_login]") {
  login_fixture f;
  const std::string well_known = std::string(idp_iss) + "/.well-known/openid-configuration";
  const std::string doc = f.docs.at(well_known);
  f.docs.erase(well_known);  // the provider is down
  for (int i = 0; i < 5; ++i) {
    auto r = testing::run_coroutine(f.login->start(code_flow::issuer_key(idp_iss), callback_uri, "192.0.2.1", "req"));
    REQUIRE_FALSE(r);
    CHECK(r.err().message == login_error::provider_unavailable);
  }
  CHECK(f.asked[well_known] == 1);
  f.docs[well_known] = doc;  // back, but the failure holds for jwks_min_refresh_s
  CHECK_FALSE(testing::run_coroutine(f.login->start(code_flow::issuer_key(idp_iss), callback_uri, "192.0.2.1", "req")));
  f.clk.advance(std::chrono::seconds(f.cfg.jwks_min_refresh_s));
  auto b = f.start();
  f.start();
  CHECK(f.asked[well_known] == 2);

  // The sign-in's tokens are verified with keys found through the same document: not fetched again.
  f.answer_with(b.query.at("nonce"));
  REQUIRE(f.finish(b, b.redirect.browser_secret));
  CHECK(f.asked[well_known] == 2);
  CHECK(f.asked[std::string(idp_iss) + "/jwks"] == 1);
}

TEST_CASE("console login: a provider's session is the proven principal until the token's expiry, its organization "
          "checked on every request",
          "[auth][console_login]") {
  login_fixture f;
  auto b = f.start();
  f.answer_with(b.query.at("nonce"));
  auto proven = f.finish(b, b.redirect.browser_secret);
  REQUIRE(proven);
  auto grant = open_identity_console_session(*f.db, f.clk, {}, proven->who, proven->expires_at);
  REQUIRE(grant);
  CHECK(grant->expires_at == format_time(proven->expires_at));  // 10 minutes, not 8 hours
  console_issuer_check offered = [](const std::string& issuer) { return issuer == idp_iss; };
  auto who = authenticate_console(*f.db, f.clk, grant->cookie, offered);
  REQUIRE(who);
  CHECK(who->via == method::oidc);
  CHECK(who->id == "alice");
  CHECK(who->issuer == idp_iss);
  CHECK(who->name == "alice@example.test");
  CHECK(who->granted == role::member);
  CHECK(who->org_name == "acme");
  CHECK(who->console_csrf == grant->csrf_token);
  // An issuer no longer offering console sign-in ends its sessions; so does no check at all.
  CHECK(authenticate_console(*f.db, f.clk, grant->cookie, [](const std::string&) { return false; }).err().code ==
        errc::unauthenticated);
  CHECK(authenticate_console(*f.db, f.clk, grant->cookie).err().code == errc::unauthenticated);
  // Its organization disabled: refused at once.
  auto acme = store::org_store(*f.db).find_org_by_name("acme");
  REQUIRE(store::org_store(*f.db).set_org_state(acme->id, "disabled", {"active"}, format_time(f.clk.now())));
  CHECK(authenticate_console(*f.db, f.clk, grant->cookie, offered).err().code == errc::permission_denied);
  REQUIRE(store::org_store(*f.db).set_org_state(acme->id, "active", {"disabled"}, format_time(f.clk.now())));
  CHECK(authenticate_console(*f.db, f.clk, grant->cookie, offered));
  // The token's expiry is the session's.
  f.clk.advance(std::chrono::seconds(600));
  CHECK(authenticate_console(*f.db, f.clk, grant->cookie, offered).err().code == errc::unauthenticated);
  // A token already past its expiry opens no session.
  CHECK(open_identity_console_session(*f.db, f.clk, {}, proven->who, f.clk.now()).err().code == errc::unauthenticated);
}

TEST_CASE("console login: a public client sends its id in the form, client_secret_post sends the secret there too",
          "[auth][console_login]") {
  login_fixture f;
  auto form_of = [&](const std::string& body) {
    std::map<std::string, std::string> form;
    std::string ignored;
    http::split_target("/?" + body, ignored, form);
    return form;
  };
  SECTION("public: PKCE alone, no Authorization") {
    f.cfg.issuers[0].console_client_secret.clear();
    auto b = f.start();
    f.answer_with(b.query.at("nonce"));
    REQUIRE(f.finish(b, b.redirect.browser_secret));
    auto form = form_of(f.tokens.form);
    CHECK(form.at("client_id") == console_client);
    CHECK(form.count("client_secret") == 0);
    CHECK(f.tokens.authorization.empty());
  }
  SECTION("client_secret_post") {
    f.cfg.issuers[0].console_client_auth = "client_secret_post";
    auto b = f.start();
    f.answer_with(b.query.at("nonce"));
    REQUIRE(f.finish(b, b.redirect.browser_secret));
    auto form = form_of(f.tokens.form);
    CHECK(form.at("client_id") == console_client);
    CHECK(form.at("client_secret") == "s3cret");
    CHECK(f.tokens.authorization.empty());
  }
}
