#include "credentials.hpp"

#include <chrono>
#include <cstdint>

#include "failure.hpp"
#include "oidc.hpp"

namespace sandfort::cli {

namespace {

// Renew this long before the expiry, so that a token does not lapse between check and use.
constexpr std::int64_t refresh_margin_s = 30;

std::int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool about_to_expire(const oidc_session& s) { return s.expires_at != 0 && now_s() + refresh_margin_s >= s.expires_at; }

class fixed final : public credentials {
 public:
  explicit fixed(std::string token) : token_(std::move(token)) {}
  std::string bearer() override { return token_; }
  bool renew(const std::string&) override { return false; }

 private:
  std::string token_;
};

class oidc_signin final : public credentials {
 public:
  explicit oidc_signin(oidc_session s) : session_(std::move(s)) {}

  std::string bearer() override {
    if (about_to_expire(session_)) replace(session_.access_token);
    return session_.access_token;
  }

  // One renewal per run: a token refused right after its renewal will not fare better.
  bool renew(const std::string& refused) override {
    if (renewed_) return false;
    renewed_ = true;
    replace(refused);
    return session_.access_token != refused;
  }

 private:
  // Under the lock, the file may already hold a newer token (another command renewed it): use
  // that; otherwise redeem the refresh token and store what comes back at once, since the old
  // refresh token may be spent.
  void replace(const std::string& stale) {
    credentials_lock lock;
    settings file = load_file_settings();
    if (!file.oidc)
      throw failure("the OIDC sign-in is gone from " + config_file().string() + " (logged out?); run `sandfort login --oidc` again");
    oidc_session& stored = *file.oidc;
    if (stored.access_token != stale && !about_to_expire(stored)) {
      session_ = stored;
      return;
    }
    if (stored.refresh_token.empty())
      throw failure("the access token from " + stored.issuer + " has expired and there is no refresh token (was the "
                    "`offline_access` scope granted?); run `sandfort login --oidc " + stored.issuer + " --client-id " +
                    stored.client_id + "` again");
    oidc::tokens t = oidc::refresh(stored);
    stored.access_token = t.access_token;
    stored.refresh_token = t.refresh_token;
    stored.expires_at = t.expires_at;
    save_settings(file);
    session_ = stored;
  }

  oidc_session session_;
  bool renewed_ = false;
};

}  // namespace

std::shared_ptr<credentials> fixed_credentials(std::string token) { return std::make_shared<fixed>(std::move(token)); }

std::shared_ptr<credentials> oidc_credentials(oidc_session session) {
  return std::make_shared<oidc_signin>(std::move(session));
}

std::shared_ptr<credentials> credentials_for(const settings& s) {
  if (!s.api_key.empty() || !s.oidc) return fixed_credentials(s.api_key);
  return oidc_credentials(*s.oidc);
}

}  // namespace sandfort::cli
