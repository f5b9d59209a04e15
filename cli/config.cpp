#include "config.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "failure.hpp"

namespace sandfort::cli {
namespace fs = std::filesystem;

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Written to a temporary file created 0600 and renamed, so the secret is never readable by
// others, not even for a moment, and a crash leaves the old file whole.
void write_private_file(const fs::path& p, const std::string& content) {
  fs::path dir = p.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw failure("cannot create " + dir.string() + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  fs::path tmp = p;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw failure("cannot write " + tmp.string() + ": " + std::strerror(errno));
  ::fchmod(fd, 0600);
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw failure("cannot write " + tmp.string() + ": " + std::strerror(err));
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), p.c_str()) != 0) throw failure("cannot write " + p.string() + ": " + std::strerror(errno));
}

}  // namespace

fs::path config_dir() {
  std::string xdg = env_or_empty("XDG_CONFIG_HOME");
  if (!xdg.empty()) return fs::path(xdg) / "sandfort";
  std::string home = env_or_empty("HOME");
  if (home.empty()) throw failure("neither XDG_CONFIG_HOME nor HOME is set: cannot find the config directory");
  return fs::path(home) / ".config" / "sandfort";
}

fs::path config_file() { return config_dir() / "config.json"; }

namespace {

oidc_session oidc_from_json(const nlohmann::json& j) {
  oidc_session o;
  o.issuer = j.value("issuer", "");
  o.client_id = j.value("client_id", "");
  o.token_endpoint = j.value("token_endpoint", "");
  o.revocation_endpoint = j.value("revocation_endpoint", "");
  o.scope = j.value("scope", "");
  o.resource = j.value("resource", "");
  o.audience = j.value("audience", "");
  o.access_token = j.value("access_token", "");
  o.refresh_token = j.value("refresh_token", "");
  if (j.contains("expires_at") && j["expires_at"].is_number()) o.expires_at = j["expires_at"].get<std::int64_t>();
  return o;
}

nlohmann::json oidc_to_json(const oidc_session& o) {
  return {{"issuer", o.issuer},
          {"client_id", o.client_id},
          {"token_endpoint", o.token_endpoint},
          {"revocation_endpoint", o.revocation_endpoint},
          {"scope", o.scope},
          {"resource", o.resource},
          {"audience", o.audience},
          {"access_token", o.access_token},
          {"refresh_token", o.refresh_token},
          {"expires_at", o.expires_at}};
}

}  // namespace

std::string bare_api_key(std::string key) {
  auto trim = [](std::string& k) {
    const char* blank = " \t\r\n";
    auto first = k.find_first_not_of(blank);
    k = first == std::string::npos ? std::string() : k.substr(first, k.find_last_not_of(blank) - first + 1);
  };
  auto drop = [&](std::string_view word) {
    if (key.size() <= word.size()) return;
    for (std::size_t i = 0; i < word.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(key[i])) != word[i]) return;
    key.erase(0, word.size());
    trim(key);
  };
  trim(key);
  drop("authorization:");
  if (key.size() > 6 && (key[6] == ' ' || key[6] == '\t')) drop("bearer");
  return key;
}

settings load_file_settings() {
  settings s;
  auto text = read_file(config_file());
  if (!text) return s;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return s;
  s.base_url = j.value("base_url", "");
  s.api_key = j.value("api_key", "");
  if (j.contains("oidc") && j["oidc"].is_object()) s.oidc = oidc_from_json(j["oidc"]);
  return s;
}

settings load_settings() {
  settings s = load_file_settings();
  if (auto url = env_or_empty("SANDFORT_BASE_URL"); !url.empty()) s.base_url = url;
  if (auto key = bare_api_key(env_or_empty("SANDFORT_API_KEY")); !key.empty()) {
    s.api_key = key;
    s.oidc.reset();
  }
  return s;
}

settings require_settings() {
  settings s = load_settings();
  if (s.base_url.empty() || (s.api_key.empty() && !s.oidc))
    throw failure("not logged in: run `sandfort login` (or `sandfort login --oidc ISSUER --client-id ID`), "
                  "or set SANDFORT_BASE_URL and SANDFORT_API_KEY");
  return s;
}

// An API-key login writes exactly {"base_url", "api_key"}, as it always has.
void save_settings(const settings& s) {
  nlohmann::json j = {{"base_url", s.base_url}};
  if (!s.api_key.empty() || !s.oidc) j["api_key"] = s.api_key;
  if (s.oidc) j["oidc"] = oidc_to_json(*s.oidc);
  write_private_file(config_file(), j.dump(2) + "\n");
}

credentials_lock::credentials_lock() {
  fs::path dir = config_dir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw failure("cannot create " + dir.string() + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  fs::path p = dir / "config.lock";
  fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) throw failure("cannot open " + p.string() + ": " + std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    ::close(fd_);
    throw failure("cannot lock " + p.string() + ": " + std::strerror(err));
  }
}

credentials_lock::~credentials_lock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

bool remove_settings() {
  std::error_code ec;
  bool removed = fs::remove(config_file(), ec);
  if (ec) throw failure("cannot remove " + config_file().string() + ": " + ec.message());
  return removed;
}

std::optional<std::string> current_sandbox() {
  auto text = read_file(config_dir() / "current");
  if (!text) return std::nullopt;
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
  if (text->empty()) return std::nullopt;
  return text;
}

void set_current_sandbox(const std::string& id) { write_private_file(config_dir() / "current", id + "\n"); }

void clear_current_sandbox() {
  std::error_code ec;
  fs::remove(config_dir() / "current", ec);
}

}  // namespace sandfort::cli
