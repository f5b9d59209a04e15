// The checkpoint signing key: its file, its id, its signatures.

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sandfort/audit/signing.hpp"
#include "support.hpp"
#include "support/prerequisite.hpp"

using namespace sandfort;
using namespace sandfort::testing;

namespace {

mode_t file_mode(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Restores the process umask when the test ends.
struct umask_scope {
  mode_t saved;
  explicit umask_scope(mode_t mask) : saved(::umask(mask)) {}
  ~umask_scope() { ::umask(saved); }
};

}  // namespace

TEST_CASE("load_or_create creates a 0600 PKCS#8 key file whatever the umask, and loads it back") {
  testing::temp_dir dir;
  const auto path = dir.file("audit.key");
  std::string key_id;
  {
    umask_scope mask(0277);  // would leave 0400 without the explicit chmod
    auto key = audit::signing_key::load_or_create(path);
    REQUIRE(key);
    key_id = key->key_id();
  }
  CHECK(file_mode(path) == 0600);
  CHECK(read_file(path).rfind("-----BEGIN PRIVATE KEY-----\n", 0) == 0);
  // Only the key is left in the directory: no temporary file.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);

  CHECK(key_id.size() == 16);
  CHECK(key_id.find_first_not_of("0123456789abcdef") == std::string::npos);
  auto again = audit::signing_key::load_or_create(path);
  REQUIRE(again);
  CHECK(again->key_id() == key_id);

  testing::temp_dir other_dir;
  auto other = audit::signing_key::load_or_create(other_dir.file("audit.key"));
  REQUIRE(other);
  CHECK(other->key_id() != key_id);
}

TEST_CASE("load_or_create refuses a key file others can read, or that is not ours, or not a key") {
  testing::temp_dir dir;
  const auto path = dir.file("audit.key");
  REQUIRE(audit::signing_key::load_or_create(path));

  for (const mode_t mode : {0644, 0640, 0604, 0660}) {
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    auto r = audit::signing_key::load_or_create(path);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::permission_denied);
    CHECK_THAT(r.err().message, Catch::Contains("group or others") && Catch::Contains("chmod 600 " + path));
  }
  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  CHECK_THAT(audit::signing_key::load_or_create(path).err().message, Catch::Contains("(mode 0644)"));
  REQUIRE(::chmod(path.c_str(), 0400) == 0);
  CHECK(audit::signing_key::load_or_create(path));

  if (::geteuid() == 0) {
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    auto r = audit::signing_key::load_or_create(path);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains("owned by uid 65534"));
  } else {
    missing_prerequisite("not root: the test of a key file owned by another user");
  }

  const auto junk = dir.file("junk.key");
  { std::ofstream(junk) << "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"; }
  REQUIRE(::chmod(junk.c_str(), 0600) == 0);
  auto r = audit::signing_key::load_or_create(junk);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("Ed25519"));

  CHECK_FALSE(audit::signing_key::load_or_create(dir.path().string()));  // a directory
  CHECK_FALSE(audit::signing_key::load_or_create(dir.file("missing-dir/audit.key")));
}

TEST_CASE("key_id is the first 16 hex of SHA-256 of the raw public key (checked by Python from the PEM)") {
  testing::temp_dir dir;
  auto key = audit::signing_key::load_or_create(dir.file("audit.key"));
  REQUIRE(key);
  const auto pem = key->public_key_pem();
  CHECK(pem.rfind("-----BEGIN PUBLIC KEY-----\n", 0) == 0);
  // An Ed25519 SubjectPublicKeyInfo is a 12-byte header and the 32 raw bytes.
  const char* script = R"PY(
import base64, hashlib, sys
body = "".join(l for l in open(sys.argv[1]).read().splitlines() if not l.startswith("-----"))
der = base64.b64decode(body)
assert len(der) == 44, len(der)
print(hashlib.sha256(der[12:]).hexdigest()[:16])
)PY";
  CHECK(testing::run_python(script, pem) == key->key_id() + "\n");

  auto pk = audit::public_key::from_pem(pem);
  REQUIRE(pk);
  CHECK(pk->key_id() == key->key_id());
}

TEST_CASE("sign and verify") {
  testing::temp_dir dir;
  auto key = audit::signing_key::load_or_create(dir.file("a.key"));
  auto other = audit::signing_key::load_or_create(dir.file("b.key"));
  REQUIRE(key);
  REQUIRE(other);
  auto pk = audit::public_key::from_pem(key->public_key_pem());
  REQUIRE(pk);

  const std::string message = R"({"head_hash":"ab","seq":3})";
  const auto signature = key->sign(message);
  CHECK(signature.size() == 88);  // 64 bytes in padded base64
  CHECK(signature.substr(86) == "==");
  CHECK(key->sign(message) == signature);  // Ed25519 is deterministic
  CHECK(pk->verify(message, signature));

  CHECK_FALSE(pk->verify(message + " ", signature));
  CHECK_FALSE(pk->verify(message, other->sign(message)));
  std::string flipped = signature;
  flipped[10] = flipped[10] == 'A' ? 'B' : 'A';
  CHECK_FALSE(pk->verify(message, flipped));
  CHECK_FALSE(pk->verify(message, signature.substr(0, 86)));        // padding missing
  CHECK_FALSE(pk->verify(message, signature + "\n"));
  CHECK_FALSE(pk->verify(message, ""));
  CHECK_FALSE(pk->verify(message, "not base64!"));
  // The last sextet before "==" carries 4 unused bits: setting one is another text of the same bytes.
  std::string malleated = signature;
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  malleated[85] = alphabet[alphabet.find(malleated[85]) ^ 1];
  CHECK_FALSE(pk->verify(message, malleated));
}

TEST_CASE("the signature checks out with the openssl command line tool") {
  testing::temp_dir dir;
  auto key = audit::signing_key::load_or_create(dir.file("a.key"));
  REQUIRE(key);
  const std::string message = "org-1 seq 7";
  std::ofstream(dir.file("pub.pem")) << key->public_key_pem();
  std::ofstream(dir.file("msg"), std::ios::binary) << message;
  std::ofstream(dir.file("sig.b64")) << key->sign(message) << "\n";
  const std::string verify = "base64 -d " + dir.file("sig.b64") + " > " + dir.file("sig") +
                             " && openssl pkeyutl -verify -pubin -inkey " + dir.file("pub.pem") + " -rawin -in " +
                             dir.file("msg") + " -sigfile " + dir.file("sig") + " > /dev/null";
  CHECK(std::system(verify.c_str()) == 0);
  std::ofstream(dir.file("msg"), std::ios::binary) << message << "!";
  CHECK(std::system(verify.c_str()) != 0);
}

TEST_CASE("public_key::from_pem takes only an Ed25519 public key") {
  CHECK_FALSE(audit::public_key::from_pem(""));
  CHECK_FALSE(audit::public_key::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"));
  // A P-256 public key.
  CHECK_FALSE(audit::public_key::from_pem("-----BEGIN PUBLIC KEY-----\n"
                                         "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEmkwx3kWZaakvlY7BmXLz9MgshWo9\n"
                                         "2zWueJnrZkRw4I5I60sPdM1EV6+7ilxRjNMavRHLob3+Yyh4JLM/frf4oA==\n"
                                         "-----END PUBLIC KEY-----\n"));
  testing::temp_dir dir;
  auto key = audit::signing_key::load_or_create(dir.file("a.key"));
  REQUIRE(key);
  CHECK_FALSE(audit::public_key::from_pem(read_file(dir.file("a.key"))));  // a private key is not a public key
}
