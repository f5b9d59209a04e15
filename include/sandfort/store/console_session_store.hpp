#pragma once
// Console sign-ins (src/store/console_sessions.cpp, docs/console.md): the SHA-256 of each session
// cookie, never the cookie. Over the one connection of store::database; a thin handle that must
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

 private:
  database* db_;
};

}  // namespace sandfort::store
