#include "sandfort/secrets/interception_ca.hpp"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <stdexcept>

namespace sandfort::secrets {

namespace {

using bio_handle = std::unique_ptr<BIO, decltype(&BIO_free)>;

std::shared_ptr<x509_st> own_cert(X509* c) { return {c, X509_free}; }
std::shared_ptr<evp_pkey_st> own_key(EVP_PKEY* k) { return {k, EVP_PKEY_free}; }

[[noreturn]] void openssl_failed(const char* what) {
  ERR_clear_error();
  throw std::runtime_error(std::string("interception CA: ") + what + " failed");
}

std::shared_ptr<evp_pkey_st> new_p256_key() {
  auto key = own_key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) openssl_failed("P-256 key generation");
  return key;
}

// A random positive 127-bit serial (RFC 5280: at most 20 octets, positive).
void set_random_serial(X509* cert) {
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) openssl_failed("RAND_bytes");
  raw[0] &= 0x7f;
  raw[0] |= 0x01;
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(BN_bin2bn(raw, sizeof raw, nullptr), BN_free);
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) == nullptr) openssl_failed("serial");
}

void set_validity(X509* cert, system_time now, std::chrono::seconds validity) {
  const auto start = std::chrono::system_clock::to_time_t(now - std::chrono::hours(1));
  const auto end = std::chrono::system_clock::to_time_t(now + validity);
  if (ASN1_TIME_set(X509_getm_notBefore(cert), start) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert), end) == nullptr)
    openssl_failed("validity");
}

void add_name_entry(X509_NAME* name, const char* field, std::string_view value) {
  const std::string cut(value.substr(0, 64));  // ub-common-name and friends: 64
  if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cut.c_str()), -1,
                                 -1, 0) != 1)
    openssl_failed("subject name");
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) openssl_failed("extension");
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) openssl_failed("extension");
}

system_time not_after_of(X509* cert) {
  struct tm t {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &t) != 1) return {};
  return std::chrono::system_clock::from_time_t(timegm(&t));
}

bool valid_dns_name(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  std::size_t label = 0;
  bool all_digits_and_dots = true;
  for (std::size_t i = 0; i < host.size(); ++i) {
    const char c = host[i];
    if (c == '.') {
      if (label == 0 || host[i - 1] == '-') return false;
      label = 0;
      continue;
    }
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok || (label == 0 && c == '-') || ++label > 63) return false;
    if (c < '0' || c > '9') all_digits_and_dots = false;
  }
  return label > 0 && host.back() != '-' && !all_digits_and_dots;  // 1.2.3.4 is an address, not a name
}

}  // namespace

interception_ca interception_ca::generate(std::string_view org_id, std::string_view org_name, system_time now) {
  auto key = new_p256_key();
  auto cert = own_cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) openssl_failed("X509_new");
  set_random_serial(cert.get());
  set_validity(cert.get(), now, std::chrono::hours(24 * 3653));
  X509_NAME* name = X509_get_subject_name(cert.get());
  add_name_entry(name, "O", "Sandfort");
  add_name_entry(name, "OU", org_name.empty() ? org_id : org_name);
  add_name_entry(name, "CN", "Sandfort interception CA " + std::string(org_id));
  if (X509_set_issuer_name(cert.get(), name) != 1 || X509_set_pubkey(cert.get(), key.get()) != 1)
    openssl_failed("issuer");
  add_extension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  add_extension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  add_extension(cert.get(), cert.get(), NID_subject_key_identifier, "hash");
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) openssl_failed("X509_sign");
  const auto until = not_after_of(cert.get());
  return interception_ca(certified_key{std::move(cert), std::move(key), until});
}

result<interception_ca> interception_ca::from_pem(std::string_view certificate_pem, std::string_view key_pem) {
  const auto refused = [](const char* why) {
    ERR_clear_error();
    return make_error(errc::invalid_argument, std::string("interception CA: ") + why);
  };
  bio_handle cb(BIO_new_mem_buf(certificate_pem.data(), static_cast<int>(certificate_pem.size())), BIO_free);
  auto cert = own_cert(cb ? PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return refused("not a PEM certificate");
  bio_handle kb(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), BIO_free);
  auto key = own_key(kb ? PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key || EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_EC) return refused("not an EC private key in PEM");
  if (X509_check_private_key(cert.get(), key.get()) != 1) return refused("the key is not the certificate's");
  if (X509_check_ca(cert.get()) != 1) return refused("the certificate is not a CA");
  const auto until = not_after_of(cert.get());
  return interception_ca(certified_key{std::move(cert), std::move(key), until});
}

std::string interception_ca::certificate_pem() const {
  bio_handle bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_X509(bio.get(), ca_.certificate.get()) != 1) openssl_failed("PEM_write_bio_X509");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

std::string interception_ca::private_key_pem() const {
  bio_handle bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), ca_.key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    openssl_failed("PEM_write_bio_PrivateKey");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  std::string pem(data, static_cast<std::size_t>(size));
  OPENSSL_cleanse(data, static_cast<std::size_t>(size));
  return pem;
}

result<certified_key> interception_ca::mint_leaf(std::string_view host, system_time now,
                                                 std::chrono::seconds validity) const {
  if (!valid_dns_name(host))
    return make_error(errc::invalid_argument, "interception CA: '" + std::string(host.substr(0, 255)) +
                                                  "' is not a lowercase DNS host name");
  auto key = new_p256_key();
  auto cert = own_cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) openssl_failed("X509_new");
  set_random_serial(cert.get());
  set_validity(cert.get(), now, validity);
  add_name_entry(X509_get_subject_name(cert.get()), "CN", host);
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_.certificate.get())) != 1 ||
      X509_set_pubkey(cert.get(), key.get()) != 1)
    openssl_failed("issuer");
  X509* issuer = ca_.certificate.get();
  add_extension(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE");
  add_extension(cert.get(), issuer, NID_key_usage, "critical,digitalSignature");
  add_extension(cert.get(), issuer, NID_ext_key_usage, "serverAuth");
  add_extension(cert.get(), issuer, NID_subject_key_identifier, "hash");
  add_extension(cert.get(), issuer, NID_authority_key_identifier, "keyid:always");
  add_extension(cert.get(), issuer, NID_subject_alt_name, ("DNS:" + std::string(host)).c_str());
  if (X509_sign(cert.get(), ca_.key.get(), EVP_sha256()) == 0) openssl_failed("X509_sign");
  const auto until = not_after_of(cert.get());
  return certified_key{std::move(cert), std::move(key), until};
}

leaf_cache::leaf_cache(std::shared_ptr<const interception_ca> ca, std::size_t capacity, std::chrono::seconds validity)
    : ca_(std::move(ca)), capacity_(capacity == 0 ? 1 : capacity), validity_(validity) {}

result<certified_key> leaf_cache::leaf_for(std::string_view host, system_time now) {
  std::lock_guard lock(mutex_);
  const std::string key(host);
  if (auto it = leaves_.find(key); it != leaves_.end()) {
    if (it->second.leaf.not_after - now > validity_ / 4) {
      order_.splice(order_.begin(), order_, it->second.position);
      return it->second.leaf;
    }
    order_.erase(it->second.position);
    leaves_.erase(it);
  }
  auto minted = ca_->mint_leaf(host, now, validity_);
  if (!minted) return minted;
  while (leaves_.size() >= capacity_) {
    leaves_.erase(order_.back());
    order_.pop_back();
  }
  order_.push_front(key);
  leaves_.emplace(key, entry{*minted, order_.begin()});
  return minted;
}

std::size_t leaf_cache::size() const {
  std::lock_guard lock(mutex_);
  return leaves_.size();
}

}  // namespace sandfort::secrets
