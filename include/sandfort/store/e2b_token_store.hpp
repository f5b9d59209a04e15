#pragma once
// The E2B-compatible sandbox plane's access tokens (src/store/e2b_tokens.cpp): the SHA-256 of
// each token, never the token. Over the one connection of store::database; a thin handle that
// must not outlive its database.

#include <cstddef>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::store {

class e2b_token_store {
 public:
  e2b_token_store(database& db) : db_(&db) {}  // NOLINT

  // One more token for the sandbox; beyond `keep` of them, the oldest stop opening it.
  result<void> add_token(const std::string& sandbox_id, const std::string& token_sha256, const std::string& now,
                         std::size_t keep);
  // Whose sandbox the token was minted for, and whether that sandbox is deleted: not_found when
  // the token was not minted for that sandbox id, whatever its organization.
  struct grant {
    std::string org_id;
    bool deleted = false;
  };
  result<grant> token_grant(const std::string& sandbox_id, const std::string& token_sha256);

 private:
  database* db_;
};

}  // namespace sandfort::store
