#pragma once
// Where the CLI keeps its state: credentials in <config dir>/config.json (mode 0600) and the
// current sandbox in <config dir>/current. SANDFORT_BASE_URL / SANDFORT_API_KEY override the file.
// The credentials are an API key or an OIDC sign-in (`login --oidc`): its refresh token and the
// current access token, renewed in place by whichever command finds it about to expire.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace sandfort::cli {

// What `login --oidc` learnt and received; written under "oidc" in config.json.
struct oidc_session {
  std::string issuer;
  std::string client_id;
  std::string token_endpoint;
  std::string revocation_endpoint;  // empty when the issuer offers none
  std::string scope;
  std::string resource;  // RFC 8707 resource indicator sent with every grant; may be empty
  std::string audience;  // `audience` parameter (Auth0 style) sent with every grant; may be empty
  std::string access_token;
  std::string refresh_token;  // empty when the issuer issued none
  std::int64_t expires_at = 0;  // of the access token, seconds since the epoch
};

struct settings {
  std::string base_url;
  std::string api_key;
  std::optional<oidc_session> oidc;
};

// $XDG_CONFIG_HOME/sandfort, else $HOME/.config/sandfort.
std::filesystem::path config_dir();
std::filesystem::path config_file();

// A key as pasted: surrounding blanks and an "Authorization: " or "Bearer " in front (what curl
// examples show) removed, since the client adds the scheme itself.
std::string bare_api_key(std::string key);

// The file's values alone (no environment); empty when there is no file.
settings load_file_settings();
// The file's values with the environment on top; any may be empty. An API key from the
// environment replaces a stored OIDC sign-in.
settings load_settings();
// As load_settings, but a base URL and credentials must be present (otherwise a failure that
// says what to do).
settings require_settings();

void save_settings(const settings& s);
// True when there was a file to remove.
bool remove_settings();

// An exclusive lock on the credentials (flock on <config dir>/config.lock), so that two commands
// never redeem the same refresh token: issuers that rotate refresh tokens revoke the whole sign-in
// when an old one is used twice.
class credentials_lock {
 public:
  credentials_lock();
  ~credentials_lock();
  credentials_lock(const credentials_lock&) = delete;
  credentials_lock& operator=(const credentials_lock&) = delete;

 private:
  int fd_ = -1;
};

std::optional<std::string> current_sandbox();
void set_current_sandbox(const std::string& id);
void clear_current_sandbox();

}  // namespace sandfort::cli
