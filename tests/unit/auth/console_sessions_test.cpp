// Console sessions (auth/console_sessions.hpp): a cookie is worth what its key is worth, on every
// request, and no more; it ends with the key, at its expiry, when signed out, or when its key has
// signed in too many times since.
#include <catch2/catch.hpp>

#include "../store/open_db.hpp"
#include "../store/temp_dir.hpp"
#include "sandfort/auth/console_sessions.hpp"
#include "sandfort/auth/keys.hpp"
#include "sandfort/crypto/digest.hpp"
#include "sandfort/store/console_session_store.hpp"
#include "support/manual_clock.hpp"

using namespace sandfort;
using namespace sandfort::auth;

namespace {

struct console_fixture {
  testing::temp_dir dir;
  std::unique_ptr<store::database> db = testing::open_db(dir.file("sandfort.db"));
  testing::manual_clock clk;
  store::org org = make("acme");

  store::org make(const std::string& name) {
    auto o = store::org_store(*db).create_org(name, false, format_time(clk.now()));
    REQUIRE(o);
    return *o;
  }
  issued_key key(role r, long long expires_in_s = 0) {
    auto k = issue_key(*db, clk, org.id, "console", r, expires_in_s);
    REQUIRE(k);
    return *k;
  }
  console_grant sign_in(const issued_key& k, console_session_options o = {}) {
    auto who = authenticate(*db, clk, "Bearer " + k.secret);
    REQUIRE(who);
    auto g = open_console_session(*db, clk, o, *who, k.secret);
    REQUIRE(g);
    return *g;
  }
};

void check_refused(const result<principal>& p, const std::string& message) {
  REQUIRE_FALSE(p);
  CHECK(p.err().code == errc::unauthenticated);
  CHECK(p.err().message == message);
}

}  // namespace

TEST_CASE("console: a session is its key's principal, with its CSRF token, only hashes are stored",
          "[auth][console]") {
  console_fixture f;
  auto k = f.key(role::member);
  auto g = f.sign_in(k);
  CHECK(g.cookie.size() == 64);
  CHECK(g.csrf_token.size() == 32);
  CHECK(g.expires_at == format_time(f.clk.now() + std::chrono::hours(8)));
  auto who = authenticate_console(*f.db, f.clk, g.cookie);
  REQUIRE(who);
  CHECK(who->id == k.record.id);
  CHECK(who->org_id == f.org.id);
  CHECK(who->granted == role::member);
  CHECK(who->via == method::api_key);
  CHECK(who->console_session == sha256_hex(g.cookie));
  CHECK(who->console_csrf == g.csrf_token);
  // Neither the cookie nor the key is in the table.
  auto row = store::console_session_store(*f.db).find_session(sha256_hex(g.cookie), format_time(f.clk.now()));
  REQUIRE(row);
  CHECK(row->key_sha256 == sha256_hex(k.secret));
  CHECK(row->credential == "key:" + sha256_hex(k.secret));
  CHECK(row->key_sha256.find(k.secret) == std::string::npos);
  CHECK(store::console_session_store(*f.db).find_session(g.cookie, format_time(f.clk.now())).err().code ==
        errc::not_found);
}

TEST_CASE("console: a session ends with its key, its organization, its expiry and its sign-out", "[auth][console]") {
  console_fixture f;
  SECTION("the key revoked") {
    auto k = f.key(role::admin);
    auto g = f.sign_in(k);
    REQUIRE(store::org_store(*f.db).revoke_api_key(f.org.id, k.record.id, format_time(f.clk.now())));
    check_refused(authenticate_console(*f.db, f.clk, g.cookie), "API key revoked");
  }
  SECTION("the organization disabled") {
    auto k = f.key(role::admin);
    auto g = f.sign_in(k);
    REQUIRE(store::org_store(*f.db).set_org_state(f.org.id, "disabled", {"active"}, format_time(f.clk.now())));
    auto who = authenticate_console(*f.db, f.clk, g.cookie);
    REQUIRE_FALSE(who);
    CHECK(who.err().code == errc::permission_denied);
  }
  SECTION("eight hours later") {
    auto g = f.sign_in(f.key(role::viewer));
    f.clk.advance(std::chrono::hours(8) - std::chrono::seconds(1));
    CHECK(authenticate_console(*f.db, f.clk, g.cookie));
    f.clk.advance(std::chrono::seconds(1));
    check_refused(authenticate_console(*f.db, f.clk, g.cookie), "console session expired or signed out");
  }
  SECTION("never past the key's own expiry") {
    auto k = f.key(role::viewer, 600);
    auto g = f.sign_in(k);
    CHECK(g.expires_at == *k.record.expires_at);
    f.clk.advance(std::chrono::seconds(600));
    check_refused(authenticate_console(*f.db, f.clk, g.cookie), "console session expired or signed out");
  }
  SECTION("signed out") {
    auto g = f.sign_in(f.key(role::member));
    auto who = authenticate_console(*f.db, f.clk, g.cookie);
    REQUIRE(who);
    REQUIRE(close_console_session(*f.db, *who));
    check_refused(authenticate_console(*f.db, f.clk, g.cookie), "console session expired or signed out");
    CHECK(close_console_session(*f.db, principal{}).err().code == errc::invalid_argument);
  }
}

TEST_CASE("console: malformed, unknown and forged cookies open nothing", "[auth][console]") {
  console_fixture f;
  auto g = f.sign_in(f.key(role::admin));
  for (const std::string& bad : {std::string(), std::string("x"), g.cookie + "0", g.cookie.substr(1),
                                std::string(64, 'G'), sha256_hex(g.cookie)})
    check_refused(authenticate_console(*f.db, f.clk, bad), bad == sha256_hex(g.cookie)
                                                               ? "console session expired or signed out"
                                                               : "invalid console session");
  std::string flipped = g.cookie;
  flipped[10] = flipped[10] == 'a' ? 'b' : 'a';
  check_refused(authenticate_console(*f.db, f.clk, flipped), "console session expired or signed out");
}

TEST_CASE("console: one key holds at most per_credential sessions, the oldest end first, expired ones are pruned",
          "[auth][console]") {
  console_fixture f;
  auto k = f.key(role::member);
  auto other = f.sign_in(f.key(role::member), {std::chrono::hours(8), 3});
  console_session_options o{std::chrono::hours(8), 3};
  std::vector<console_grant> made;
  for (int i = 0; i < 4; ++i) {
    made.push_back(f.sign_in(k, o));
    f.clk.advance(std::chrono::milliseconds(10));
  }
  check_refused(authenticate_console(*f.db, f.clk, made[0].cookie), "console session expired or signed out");
  for (std::size_t i = 1; i < 4; ++i) CHECK(authenticate_console(*f.db, f.clk, made[i].cookie));
  CHECK(authenticate_console(*f.db, f.clk, other.cookie));  // another key's are its own

  f.clk.advance(std::chrono::hours(9));
  store::console_session_store sessions(*f.db);
  auto pruned = sessions.prune_sessions(format_time(f.clk.now()), 2);
  REQUIRE(pruned);
  CHECK(*pruned == 2);
  pruned = sessions.prune_sessions(format_time(f.clk.now()), 100);
  REQUIRE(pruned);
  CHECK(*pruned == 2);
}

TEST_CASE("console: an identity provider's principal or another key's secret opens no session", "[auth][console]") {
  console_fixture f;
  auto k = f.key(role::member);
  auto who = authenticate(*f.db, f.clk, "Bearer " + k.secret);
  REQUIRE(who);
  principal oidc = *who;
  oidc.via = method::oidc;
  CHECK(open_console_session(*f.db, f.clk, {}, oidc, k.secret).err().code == errc::invalid_argument);
  auto other = f.key(role::admin);
  CHECK(open_console_session(*f.db, f.clk, {}, *who, other.secret).err().code == errc::unauthenticated);
}

TEST_CASE("console: the session cookie is found among a Cookie header's pairs, the Secure name wins",
          "[auth][console]") {
  CHECK(console_cookie_of("") == "");
  CHECK(console_cookie_of("a=1; sandfort_session=abc; b=2") == "abc");
  CHECK(console_cookie_of("sandfort_session=abc") == "abc");
  CHECK(console_cookie_of("xsandfort_session=abc; sandfort_sessionx=def") == "");
  CHECK(console_cookie_of("sandfort_session=plain; __Host-sandfort_session=secure") == "secure");
  CHECK(console_cookie_of("__Host-sandfort_session=secure; sandfort_session=plain") == "secure");
  CHECK(console_cookie_of("sandfort_session=first; sandfort_session=second") == "first");
}
