// The E2B-compatible sandbox plane's access tokens, stored hashed.
#include "sandfort/store/e2b_token_store.hpp"

#include "statement.hpp"

namespace sandfort::store {

using detail::query;
using detail::statement;

result<void> e2b_token_store::add_token(const std::string& sandbox_id, const std::string& token_sha256,
                                        const std::string& now, std::size_t keep) {
  if (auto r = query(*db_, "INSERT INTO e2b_access_tokens (token_sha256, sandbox_id, created_at) VALUES (?1, ?2, ?3)",
                     token_sha256, sandbox_id, now)
                   .run();
      !r)
    return r;
  return query(*db_,
               "DELETE FROM e2b_access_tokens WHERE sandbox_id = ?1 AND token_sha256 NOT IN (SELECT token_sha256 "
               "FROM e2b_access_tokens WHERE sandbox_id = ?1 ORDER BY created_at DESC, rowid DESC LIMIT ?2)",
               sandbox_id, static_cast<std::int64_t>(keep))
      .run();
}

auto e2b_token_store::token_grant(const std::string& sandbox_id, const std::string& token_sha256) -> result<grant> {
  return query(*db_,
               "SELECT s.org_id, s.state = 'deleted' FROM e2b_access_tokens t JOIN sandboxes s ON s.id = t.sandbox_id "
               "WHERE t.token_sha256 = ?1 AND t.sandbox_id = ?2",
               token_sha256, sandbox_id)
      .one([](const statement& st) { return grant{st.column_text(0), st.column_int64(1) != 0}; },
           "sandbox " + sandbox_id + " not found");
}

}  // namespace sandfort::store
