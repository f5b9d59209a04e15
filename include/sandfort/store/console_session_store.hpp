#pragma once
// Console sign-ins (src/store/console_sessions.cpp, docs/console.md): the SHA-256 of each session
// cookie, never the cookie; and the sign-ins through an identity provider under way. Over the one connection of store::database; a thin handle that must
// not outlive its database.

#include <cstddef>
#include <cstdint>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::store {

struct console_session {
  // Who may hold at most `keep` sessions at once: "key:<key sha256>", or "oidc:<sub>@<issuer>".
  std::string credential;
  std::string key_sha256;  // signed in with an API key: that key, checked again on every request
  std::string identity;    // signed in through an identity provider: the principal, as JSON
  std::string csrf_token;
  std::string created_at;
  std::string expires_at;
};

// A sign-in through an identity provider that has begun (the browser was sent to the provider)
// and not yet come back: what the callback needs to finish it.
struct pending_login {
  std::string browser_sha256;  // SHA-256 of the pre-login cookie that began it
  std::string issuer;
  std::string redirect_uri;   // exactly as sent to the provider; the token request repeats it
  std::string code_verifier;  // PKCE: worth nothing without the code, which only the browser gets
  std::string nonce;
  std::string source;  // the client's address
  std::string created_at;
  std::string expires_at;
};

class console_session_store {
 public:
  console_session_store(database& db) : db_(&db) {}  // NOLINT

  // One more session of its credential; beyond `keep` of them, the oldest end.
  result<void> add_session(const std::string& id_sha256, const console_session& s, std::size_t keep);
  // not_found when there is none, or it has expired at `now`.
  result<console_session> find_session(const std::string& id_sha256, const std::string& now);
  // Ends it (signing out); ending one that is gone is no error.
  result<void> remove_session(const std::string& id_sha256);
  // Removes up to `batch` sessions expired at `now`; how many.
  result<std::int64_t> prune_sessions(const std::string& now, std::size_t batch);

  // Sign-ins begun and not ended that have not expired at `now`.
  result<std::int64_t> count_pending_logins(const std::string& now);
  // One more, found by the SHA-256 of its state; beyond `keep` of its source, the oldest end.
  result<void> add_pending_login(const std::string& state_sha256, const pending_login& p, std::size_t keep);
  // Takes it out (a state is good once, whatever the callback's outcome); not_found when absent.
  // Whether it has expired is the caller's to judge.
  result<pending_login> take_pending_login(const std::string& state_sha256);
  // Removes up to `batch` expired at `now`; how many.
  result<std::int64_t> prune_pending_logins(const std::string& now, std::size_t batch);

 private:
  database* db_;
};

}  // namespace sandfort::store
