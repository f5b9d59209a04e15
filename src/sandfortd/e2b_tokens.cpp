#include "e2b_tokens.hpp"

namespace sandfort::daemon {

// Tokens one sandbox keeps at once (one per create or connect): the oldest stop working.
constexpr std::size_t e2b_tokens_kept = 16;

result<void> e2b_tokens::add(const std::string& sandbox_id, const std::string& token_sha256) {
  return store_.add_token(sandbox_id, token_sha256, format_time(clock_.now()), e2b_tokens_kept);
}

auto e2b_tokens::grant_of(const std::string& sandbox_id, const std::string& token_sha256) -> result<grant> {
  auto g = store_.token_grant(sandbox_id, token_sha256);
  if (!g) return std::move(g).err();
  return grant{g->org_id, g->deleted};
}

}  // namespace sandfort::daemon
