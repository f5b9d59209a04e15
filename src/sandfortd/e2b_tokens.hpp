#pragma once
// The E2B sandbox plane's access tokens over the store (compat::e2b::token_backend).

#include "sandfort/compat/e2b/e2b.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/store/e2b_token_store.hpp"

namespace sandfort::daemon {

class e2b_tokens final : public compat::e2b::token_backend {
 public:
  e2b_tokens(store::database& db, const clock& clk) : store_(db), clock_(clk) {}
  result<void> add(const std::string& sandbox_id, const std::string& token_sha256) override;
  result<grant> grant_of(const std::string& sandbox_id, const std::string& token_sha256) override;

 private:
  store::e2b_token_store store_;
  const clock& clock_;
};

}  // namespace sandfort::daemon
