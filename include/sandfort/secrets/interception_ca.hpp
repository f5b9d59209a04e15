#pragma once
// An organization's interception CA (docs/secrets.md): the certificate authority a sandbox will
// trust so that the egress proxy can terminate TLS for the hosts a secret is bound to, and the
// leaf certificates it mints for those hosts. ECDSA P-256; the CA is `CA:TRUE, pathlen:0`,
// `keyCertSign` only, valid ten years; a leaf names one DNS host in its subjectAltName, is valid
// a few days, and is kept in memory per host (a bounded cache), never stored.
//
// The CA's private key leaves this object only as PEM to be sealed (secrets::sealing_key) into
// the database; it is never returned by the API nor written anywhere else.

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "sandfort/core/error.hpp"

struct x509_st;       // OpenSSL's X509
struct evp_pkey_st;   // OpenSSL's EVP_PKEY

namespace sandfort::secrets {

using system_time = std::chrono::system_clock::time_point;

// A certificate with its private key.
struct certified_key {
  std::shared_ptr<x509_st> certificate;
  std::shared_ptr<evp_pkey_st> key;
  system_time not_after;
};

class interception_ca {
 public:
  // A new CA for the organization, valid from an hour before `now` for ten years.
  static interception_ca generate(std::string_view org_id, std::string_view org_name, system_time now);
  // A CA stored before: its certificate and (unsealed) private key in PEM; invalid_argument when
  // they are not a CA certificate and its own P-256 key.
  static result<interception_ca> from_pem(std::string_view certificate_pem, std::string_view key_pem);

  std::string certificate_pem() const;
  std::string private_key_pem() const;  // PKCS#8, unencrypted: seal it before it is stored
  x509_st* certificate() const { return ca_.certificate.get(); }
  system_time not_after() const { return ca_.not_after; }

  // A leaf for `host` (a DNS name: lowercase letters, digits, `-`, dots; no wildcard, no IP
  // literal), signed by this CA, valid from an hour before `now` for `validity`.
  result<certified_key> mint_leaf(std::string_view host, system_time now, std::chrono::seconds validity) const;

 private:
  explicit interception_ca(certified_key ca) : ca_(std::move(ca)) {}
  certified_key ca_;
};

// Leaves minted by one CA, kept per host: at most `capacity` (the least recently used goes), each
// until a quarter of its validity is left. Thread-safe.
class leaf_cache {
 public:
  leaf_cache(std::shared_ptr<const interception_ca> ca, std::size_t capacity,
             std::chrono::seconds validity = std::chrono::hours(24 * 7));

  result<certified_key> leaf_for(std::string_view host, system_time now);
  std::size_t size() const;

 private:
  std::shared_ptr<const interception_ca> ca_;
  std::size_t capacity_;
  std::chrono::seconds validity_;
  mutable std::mutex mutex_;
  std::list<std::string> order_;  // most recently used first
  struct entry {
    certified_key leaf;
    std::list<std::string>::iterator position;
  };
  std::unordered_map<std::string, entry> leaves_;
};

}  // namespace sandfort::secrets
