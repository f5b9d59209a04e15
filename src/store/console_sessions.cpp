// Console sign-ins, stored by the SHA-256 of their cookie.
#include "sandfort/store/console_session_store.hpp"

#include "statement.hpp"

namespace sandfort::store {

using detail::null_if_empty;
using detail::query;
using detail::statement;

result<void> console_session_store::add_session(const std::string& id_sha256, const console_session& s,
                                                std::size_t keep) {
  if (auto r = query(*db_,
                     "INSERT INTO console_sessions (id_sha256, credential, key_sha256, identity, csrf_token, "
                     "created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                     id_sha256, s.credential, null_if_empty{s.key_sha256}, null_if_empty{s.identity}, s.csrf_token,
                     s.created_at, s.expires_at)
                   .run();
      !r)
    return r;
  // A key that signs in without end must not grow the table without end.
  return query(*db_,
               "DELETE FROM console_sessions WHERE credential = ?1 AND id_sha256 NOT IN (SELECT id_sha256 FROM "
               "console_sessions WHERE credential = ?1 ORDER BY created_at DESC, rowid DESC LIMIT ?2)",
               s.credential, static_cast<std::int64_t>(keep))
      .run();
}

result<console_session> console_session_store::find_session(const std::string& id_sha256, const std::string& now) {
  return query(*db_,
               "SELECT credential, key_sha256, identity, csrf_token, created_at, expires_at FROM console_sessions "
               "WHERE id_sha256 = ?1 AND expires_at > ?2",
               id_sha256, now)
      .one(
          [](const statement& st) {
            return console_session{st.column_text(0), st.column_text(1), st.column_text(2),
                                   st.column_text(3), st.column_text(4), st.column_text(5)};
          },
          "no such console session");
}

result<void> console_session_store::remove_session(const std::string& id_sha256) {
  return query(*db_, "DELETE FROM console_sessions WHERE id_sha256 = ?1", id_sha256).run();
}

result<std::int64_t> console_session_store::prune_sessions(const std::string& now, std::size_t batch) {
  return query(*db_,
               "DELETE FROM console_sessions WHERE id_sha256 IN (SELECT id_sha256 FROM console_sessions WHERE "
               "expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
               now, static_cast<std::int64_t>(batch))
      .changes();
}

result<std::int64_t> console_session_store::count_pending_logins(const std::string& now) {
  return query(*db_, "SELECT COUNT(*) FROM console_logins WHERE expires_at > ?1", now).count();
}

result<void> console_session_store::add_pending_login(const std::string& state_sha256, const pending_login& p,
                                                      std::size_t keep) {
  if (auto r = query(*db_,
                     "INSERT INTO console_logins (state_sha256, browser_sha256, issuer, redirect_uri, code_verifier, "
                     "nonce, source, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                     state_sha256, p.browser_sha256, p.issuer, p.redirect_uri, p.code_verifier, p.nonce, p.source,
                     p.created_at, p.expires_at)
                   .run();
      !r)
    return r;
  // One address that starts sign-ins without end ends its own oldest, not everyone's.
  return query(*db_,
               "DELETE FROM console_logins WHERE source = ?1 AND state_sha256 NOT IN (SELECT state_sha256 FROM "
               "console_logins WHERE source = ?1 ORDER BY created_at DESC, rowid DESC LIMIT ?2)",
               p.source, static_cast<std::int64_t>(keep))
      .run();
}

result<pending_login> console_session_store::take_pending_login(const std::string& state_sha256) {
  return query(*db_,
               "DELETE FROM console_logins WHERE state_sha256 = ?1 RETURNING browser_sha256, issuer, redirect_uri, "
               "code_verifier, nonce, source, created_at, expires_at",
               state_sha256)
      .one(
          [](const statement& st) {
            return pending_login{st.column_text(0), st.column_text(1), st.column_text(2), st.column_text(3),
                                 st.column_text(4), st.column_text(5), st.column_text(6), st.column_text(7)};
          },
          "no such sign-in under way");
}

result<std::int64_t> console_session_store::prune_pending_logins(const std::string& now, std::size_t batch) {
  return query(*db_,
               "DELETE FROM console_logins WHERE state_sha256 IN (SELECT state_sha256 FROM console_logins WHERE "
               "expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
               now, static_cast<std::int64_t>(batch))
      .changes();
}

}  // namespace sandfort::store
