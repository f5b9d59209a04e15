#include "sandfort/secrets/interception_ca.hpp"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

using namespace sandfort;
using namespace sandfort::secrets;
using namespace std::chrono_literals;

namespace {

// X509_verify_cert of `leaf` against `ca` alone as the trust anchor, at `when`, for TLS servers.
int verify_leaf(X509* leaf, X509* ca, std::chrono::system_clock::time_point when) {
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  REQUIRE(X509_STORE_add_cert(store.get(), ca) == 1);
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  REQUIRE(X509_STORE_CTX_init(ctx.get(), store.get(), leaf, nullptr) == 1);
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
  X509_STORE_CTX_set_time(ctx.get(), 0, std::chrono::system_clock::to_time_t(when));
  if (X509_verify_cert(ctx.get()) == 1) return X509_V_OK;
  return X509_STORE_CTX_get_error(ctx.get());
}

std::string subject_of(X509* cert) {
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof buf);
  return buf;
}

const auto t0 = std::chrono::system_clock::from_time_t(1'800'000'000);  // 2027-01-15

}  // namespace

TEST_CASE("an organization's CA is a P-256 CA limited to signing leaves, named for Sandfort and the org") {
  const auto ca = interception_ca::generate("org-0123456789abcdef", "acme", t0);
  X509* c = ca.certificate();
  CHECK(X509_check_ca(c) == 1);
  BASIC_CONSTRAINTS* bc = static_cast<BASIC_CONSTRAINTS*>(X509_get_ext_d2i(c, NID_basic_constraints, nullptr, nullptr));
  REQUIRE(bc != nullptr);
  CHECK(bc->ca != 0);
  REQUIRE(bc->pathlen != nullptr);
  CHECK(ASN1_INTEGER_get(bc->pathlen) == 0);
  BASIC_CONSTRAINTS_free(bc);
  CHECK((X509_get_key_usage(c) & KU_KEY_CERT_SIGN) != 0);
  CHECK((X509_get_key_usage(c) & KU_DIGITAL_SIGNATURE) == 0);
  const auto subject = subject_of(c);
  CHECK(subject.find("Sandfort") != std::string::npos);
  CHECK(subject.find("acme") != std::string::npos);
  CHECK(subject.find("org-0123456789abcdef") != std::string::npos);
  EVP_PKEY* pub = X509_get0_pubkey(c);
  CHECK(EVP_PKEY_get_base_id(pub) == EVP_PKEY_EC);
  CHECK(EVP_PKEY_get_bits(pub) == 256);
  // Ten years.
  const auto years = std::chrono::duration_cast<std::chrono::hours>(ca.not_after() - t0).count() / 24 / 365;
  CHECK(years == 10);
  CHECK(ca.certificate_pem().rfind("-----BEGIN CERTIFICATE-----", 0) == 0);
}

TEST_CASE("a minted leaf verifies against the CA with X509_verify_cert and names its host in the SAN") {
  const auto ca = interception_ca::generate("org-1", "acme", t0);
  auto leaf = ca.mint_leaf("api.openai.com", t0, 24h * 7);
  REQUIRE(leaf);
  CHECK(verify_leaf(leaf->certificate.get(), ca.certificate(), t0) == X509_V_OK);
  CHECK(X509_check_host(leaf->certificate.get(), "api.openai.com", 0, 0, nullptr) == 1);
  CHECK(X509_check_host(leaf->certificate.get(), "api.openai.com.evil.test", 0, 0, nullptr) != 1);
  CHECK(X509_check_host(leaf->certificate.get(), "openai.com", 0, 0, nullptr) != 1);
  CHECK(X509_check_ca(leaf->certificate.get()) == 0);

  GENERAL_NAMES* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(leaf->certificate.get(), NID_subject_alt_name, nullptr, nullptr));
  REQUIRE(names != nullptr);
  REQUIRE(sk_GENERAL_NAME_num(names) == 1);
  const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, 0);
  REQUIRE(n->type == GEN_DNS);
  CHECK(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName)),
                    static_cast<std::size_t>(ASN1_STRING_length(n->d.dNSName))) == "api.openai.com");
  GENERAL_NAMES_free(names);

  SECTION("not after its validity, nor under another CA") {
    CHECK(verify_leaf(leaf->certificate.get(), ca.certificate(), t0 + 24h * 8) == X509_V_ERR_CERT_HAS_EXPIRED);
    const auto other = interception_ca::generate("org-2", "beta", t0);
    CHECK(verify_leaf(leaf->certificate.get(), other.certificate(), t0) != X509_V_OK);
  }
}

TEST_CASE("leaves are minted only for DNS host names") {
  const auto ca = interception_ca::generate("org-1", "acme", t0);
  for (const char* bad : {"", "*.example.com", "Example.com", "1.2.3.4", "exa mple.com", "a..b", "-a.com", "a-.com",
                          "example.com/x", "exa\nmple.com"})
    CHECK_FALSE(ca.mint_leaf(bad, t0, 24h));
  CHECK(ca.mint_leaf("localhost", t0, 24h));
  CHECK(ca.mint_leaf("a-b.c9.example", t0, 24h));
}

TEST_CASE("a CA stored as PEM comes back the same and signs leaves that verify under the original") {
  const auto ca = interception_ca::generate("org-1", "acme", t0);
  auto back = interception_ca::from_pem(ca.certificate_pem(), ca.private_key_pem());
  REQUIRE(back);
  CHECK(back->certificate_pem() == ca.certificate_pem());
  auto leaf = back->mint_leaf("example.com", t0, 24h);
  REQUIRE(leaf);
  CHECK(verify_leaf(leaf->certificate.get(), ca.certificate(), t0) == X509_V_OK);

  const auto other = interception_ca::generate("org-2", "beta", t0);
  CHECK_FALSE(interception_ca::from_pem(ca.certificate_pem(), other.private_key_pem()));  // not its key
  CHECK_FALSE(interception_ca::from_pem("nope", ca.private_key_pem()));
  // A leaf is not a CA.
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  REQUIRE(PEM_write_bio_X509(bio.get(), leaf->certificate.get()) == 1);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  std::unique_ptr<BIO, decltype(&BIO_free)> kbio(BIO_new(BIO_s_mem()), BIO_free);
  REQUIRE(PEM_write_bio_PrivateKey(kbio.get(), leaf->key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1);
  char* kdata = nullptr;
  const long ksize = BIO_get_mem_data(kbio.get(), &kdata);
  CHECK_FALSE(interception_ca::from_pem(std::string(data, static_cast<std::size_t>(size)),
                                        std::string(kdata, static_cast<std::size_t>(ksize))));
}

TEST_CASE("the leaf cache keeps one leaf per host within its bound and mints again near expiry") {
  auto ca = std::make_shared<const interception_ca>(interception_ca::generate("org-1", "acme", t0));
  leaf_cache cache(ca, 2, 24h * 4);
  auto a1 = cache.leaf_for("a.example", t0);
  REQUIRE(a1);
  auto a2 = cache.leaf_for("a.example", t0 + 1h);
  REQUIRE(a2);
  CHECK(a1->certificate.get() == a2->certificate.get());
  REQUIRE(cache.leaf_for("b.example", t0));
  REQUIRE(cache.leaf_for("a.example", t0));  // a is now the most recently used
  REQUIRE(cache.leaf_for("c.example", t0));  // b goes
  CHECK(cache.size() == 2);
  CHECK(cache.leaf_for("a.example", t0)->certificate.get() == a1->certificate.get());
  // With less than a quarter of its validity left, a leaf is minted again.
  auto late = cache.leaf_for("a.example", t0 + 24h * 3 + 2h);
  REQUIRE(late);
  CHECK(late->certificate.get() != a1->certificate.get());
  CHECK_FALSE(cache.leaf_for("*.example", t0));
  CHECK(cache.size() == 2);
}
