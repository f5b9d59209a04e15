#include "sandfort/secrets/sealing.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "sandfort/core/base64.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::secrets {

namespace {

constexpr std::size_t nonce_size = 12;
constexpr std::size_t tag_size = 16;
constexpr std::string_view sealed_prefix = "v1.";

using cipher_ctx_ptr = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

struct key_fd {
  int fd;
  ~key_fd() {
    if (fd >= 0) ::close(fd);
  }
};

error key_os_error(const std::string& what, const std::string& path) {
  return make_error(errc::internal, what + " " + path + ": " + std::strerror(errno));
}

const unsigned char* bytes_of(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

std::string hex_of(const unsigned char* p, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 0xf]);
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

result<std::string> read_key_text(int fd, const std::string& path) {
  std::string out;
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return key_os_error("cannot read secrets key file", path);
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > 1024) return make_error(errc::invalid_argument, "secrets key file " + path + " is too large");
  }
}

result<sealing_key> parse_key_text(std::string text, const std::string& path) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  std::string raw;
  bool ok = text.size() == key_size * 2;
  for (std::size_t i = 0; ok && i < text.size(); i += 2) {
    const int hi = hex_digit(text[i]), lo = hex_digit(text[i + 1]);
    ok = hi >= 0 && lo >= 0;
    raw.push_back(static_cast<char>(hi * 16 + lo));
  }
  if (!ok)
    return make_error(errc::invalid_argument,
                      "secrets key file " + path + " does not hold a key (64 hexadecimal characters, 32 bytes)");
  return sealing_key::from_bytes(raw);
}

result<sealing_key> load_key_file(const std::string& path) {
  key_fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW)};
  if (file.fd < 0) return key_os_error("cannot open secrets key file", path);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return key_os_error("cannot stat secrets key file", path);
  if (!S_ISREG(st.st_mode))
    return make_error(errc::invalid_argument, "secrets key file " + path + " is not a regular file");
  if (st.st_uid != ::geteuid())
    return make_error(errc::permission_denied, "secrets key file " + path + " is owned by uid " +
                                                   std::to_string(st.st_uid) + ", not by this process's uid " +
                                                   std::to_string(::geteuid()));
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(errc::permission_denied, "secrets key file " + path +
                                                   " is accessible to group or others (mode " + mode +
                                                   "); run: chmod 600 " + path);
  }
  auto text = read_key_text(file.fd, path);
  if (!text) return std::move(text).err();
  return parse_key_text(std::move(*text), path);
}

// A fresh 0600 file linked to path; false when path appeared meanwhile (left as it is).
result<bool> install_key_file(const std::string& path, const std::string& contents) {
  const std::string temp = path + ".tmp-" + random_hex(8);
  key_fd file{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
  if (file.fd < 0) return key_os_error("cannot create secrets key file", temp);
  bool written = ::fchmod(file.fd, 0600) == 0;
  std::string_view rest = contents;
  while (written && !rest.empty()) {
    const ssize_t n = ::write(file.fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) written = false;
    else rest.remove_prefix(static_cast<std::size_t>(n));
  }
  if (!written || ::fsync(file.fd) != 0) {
    auto e = key_os_error("cannot write secrets key file", temp);
    ::unlink(temp.c_str());
    return e;
  }
  const int linked = ::link(temp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (linked != 0 && link_errno == EEXIST) return false;
  if (linked != 0) {
    errno = link_errno;
    return key_os_error("cannot create secrets key file", path);
  }
  const auto dir = std::filesystem::path(path).parent_path();
  key_fd dir_fd{::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir_fd.fd >= 0) ::fsync(dir_fd.fd);  // best effort: the key is already usable
  return true;
}

}  // namespace

result<sealing_key> sealing_key::from_bytes(std::string_view raw) {
  if (raw.size() != key_size) return make_error(errc::invalid_argument, "a secrets key is 32 bytes");
  std::array<unsigned char, key_size> k{};
  std::memcpy(k.data(), raw.data(), key_size);
  return sealing_key(k);
}

sealing_key sealing_key::generate() {
  std::array<unsigned char, key_size> k{};
  if (RAND_bytes(k.data(), static_cast<int>(k.size())) != 1) throw std::runtime_error("RAND_bytes failed");
  return sealing_key(k);
}

result<sealing_key> sealing_key::load_or_create(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 || errno != ENOENT) return load_key_file(path);
  const auto fresh = generate();
  auto installed = install_key_file(path, hex_of(fresh.key_.data(), fresh.key_.size()) + "\n");
  if (!installed) return std::move(installed).err();
  if (!*installed) return load_key_file(path);
  return fresh;
}

std::string sealing_key::seal(std::string_view plaintext, std::string_view aad) const {
  unsigned char nonce[nonce_size];
  if (RAND_bytes(nonce, sizeof nonce) != 1) throw std::runtime_error("RAND_bytes failed");
  cipher_ctx_ptr ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  std::string out(nonce_size + plaintext.size() + tag_size, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  std::memcpy(o, nonce, nonce_size);
  int len = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(nonce_size), nullptr) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, key_.data(), nonce) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, bytes_of(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), o + nonce_size, &len, bytes_of(plaintext), static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), o + nonce_size + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag_size),
                          o + nonce_size + plaintext.size()) != 1)
    throw std::runtime_error("AES-256-GCM sealing failed");
  return std::string(sealed_prefix) + base64_encode(out);
}

result<std::string> sealing_key::open(std::string_view sealed, std::string_view aad) const {
  const auto refused = [] { return make_error(errc::invalid_argument, "sealed value does not open with this key"); };
  if (sealed.substr(0, sealed_prefix.size()) != sealed_prefix) return refused();
  auto raw = base64_decode(sealed.substr(sealed_prefix.size()));
  if (!raw || raw->size() < nonce_size + tag_size) return refused();
  const auto* in = bytes_of(*raw);
  const std::size_t text_size = raw->size() - nonce_size - tag_size;
  std::string out(text_size, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  cipher_ctx_ptr ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0;
  unsigned char tag[tag_size];
  std::memcpy(tag, in + nonce_size + text_size, tag_size);
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(nonce_size), nullptr) != 1 ||
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, key_.data(), in) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, bytes_of(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), o, &len, in + nonce_size, static_cast<int>(text_size)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(tag_size), tag) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), o + len, &len) != 1) {
    OPENSSL_cleanse(out.data(), out.size());
    return refused();
  }
  return out;
}

std::string sealing_key::key_id() const {
  std::string material = "sandfort secrets key";
  material.append(reinterpret_cast<const char*>(key_.data()), key_.size());
  auto id = sha256_hex(material).substr(0, 16);
  OPENSSL_cleanse(material.data(), material.size());
  return id;
}

std::string value_aad(std::string_view org_id, std::string_view name) {
  // Lengths first: ("a", "bc") and ("ab", "c") must differ.
  return "sandfort-secret-value/" + std::to_string(org_id.size()) + ":" + std::string(org_id) + "/" +
         std::to_string(name.size()) + ":" + std::string(name);
}

std::string ca_key_aad(std::string_view org_id) {
  return "sandfort-interception-ca-key/" + std::to_string(org_id.size()) + ":" + std::string(org_id);
}

}  // namespace sandfort::secrets
