// The hash chain and sealing.

#include <catch2/catch.hpp>

#include <tuple>

#include "sandfort/audit/chain.hpp"
#include "sandfort/crypto/digest.hpp"
#include "support.hpp"

using namespace sandfort;

TEST_CASE("genesis is 64 zeros") { CHECK(audit::genesis_hash() == std::string(64, '0')); }

TEST_CASE("a chain of 3 events: each hash covers its predecessor's hash and its own canonical form") {
  const auto chain = testing::sealed_chain("org-0000000000000001", 3);
  REQUIRE(chain.size() == 3);
  std::string prev = audit::genesis_hash();
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const auto& e = chain[i];
    CHECK(e.seq == static_cast<std::int64_t>(i + 1));
    CHECK(e.prev_hash == prev);
    CHECK(e.hash == sha256_hex(prev + audit::canonical_json(e)));
    CHECK(e.hash == audit::chain_hash(prev, e));
    CHECK(e.hash.size() == 64);
    prev = e.hash;
  }
  CHECK(chain[0].hash != chain[1].hash);
  CHECK(chain[1].hash != chain[2].hash);
}

TEST_CASE("every field is covered by the hash") {
  const auto e = testing::sealed_chain("org-0000000000000001", 1).front();
  const std::vector<std::string audit::event_record::*> fields = {
      &audit::event_record::org_id,     &audit::event_record::ts,     &audit::event_record::actor,
      &audit::event_record::action,     &audit::event_record::target, &audit::event_record::outcome,
      &audit::event_record::request_id, &audit::event_record::source, &audit::event_record::prev_hash};
  for (auto field : fields) {
    auto edited = e;
    edited.*field += "x";
    CHECK(audit::chain_hash(e.prev_hash, edited) != e.hash);
  }
  auto edited = e;
  edited.seq = 2;
  CHECK(audit::chain_hash(e.prev_hash, edited) != e.hash);
  edited = e;
  edited.details = R"({"n":2,"image":"python:3.12"})";
  CHECK(audit::chain_hash(e.prev_hash, edited) != e.hash);
  // The same details written another way is the same event.
  edited.details = R"({ "image" : "python:3.12", "n" : 1 })";
  CHECK(audit::chain_hash(e.prev_hash, edited) == e.hash);
}

TEST_CASE("seal makes the event the head's successor") {
  auto e = testing::sample_event("org-0000000000000001", 1);
  REQUIRE(audit::seal(e, audit::chain_head{}));
  CHECK(e.seq == 1);
  CHECK(e.prev_hash == audit::genesis_hash());
  CHECK(e.hash == audit::chain_hash(audit::genesis_hash(), e));

  // A head of seq 0 that names the genesis hash is also an empty chain.
  auto f = testing::sample_event("org-0000000000000001", 1);
  REQUIRE(audit::seal(f, audit::chain_head{0, audit::genesis_hash()}));
  CHECK(f.hash == e.hash);

  auto next = testing::sample_event("org-0000000000000001", 2);
  next.seq = 99;                // whatever the caller put there
  next.prev_hash = "garbage";
  REQUIRE(audit::seal(next, audit::chain_head{e.seq, e.hash}));
  CHECK(next.seq == 2);
  CHECK(next.prev_hash == e.hash);
  CHECK(next.hash == audit::chain_hash(e.hash, next));
}

TEST_CASE("seal stores what it hashes: canonical details, invalid UTF-8 replaced") {
  auto e = testing::sample_event("org-0000000000000001", 1);
  e.details = R"( { "z" : 1 , "a" : [ true ] } )";
  e.actor = "bad\xff\xfe byte";
  e.target = "cut \xe2\x82";
  REQUIRE(audit::seal(e, audit::chain_head{}));
  CHECK(e.details == R"({"a":[true],"z":1})");
  CHECK(e.actor == "bad\xef\xbf\xbd\xef\xbf\xbd byte");
  CHECK(e.target == "cut \xef\xbf\xbd\xef\xbf\xbd");
  CHECK(audit::try_canonical_json(e));
  CHECK(e.hash == audit::chain_hash(e.prev_hash, e));

  auto empty = testing::sample_event("org-0000000000000001", 1);
  empty.details = "";
  REQUIRE(audit::seal(empty, audit::chain_head{}));
  CHECK(empty.details == "{}");
}

TEST_CASE("seal refuses, leaving the event unchanged") {
  const auto original = testing::sample_event("org-0000000000000001", 1);
  const auto refuses = [](const audit::event_record& e, const audit::chain_head& head) {
    auto copy = e;
    auto r = audit::seal(copy, head);
    const bool unchanged = std::tie(copy.org_id, copy.seq, copy.actor, copy.target, copy.details, copy.prev_hash,
                                    copy.hash) ==
                           std::tie(e.org_id, e.seq, e.actor, e.target, e.details, e.prev_hash, e.hash);
    return !r && r.err().code == errc::invalid_argument && unchanged;
  };
  auto e = original;
  e.details = R"({"ratio":0.5})";
  CHECK(refuses(e, {}));
  e.details = R"(["not","an","object"])";
  CHECK(refuses(e, {}));
  e = original;
  e.org_id = "";
  CHECK(refuses(e, {}));
  CHECK(refuses(original, audit::chain_head{5, ""}));
  e = original;
  e.actor = "bad\xff";  // would be repaired by a successful seal
  CHECK(refuses(e, audit::chain_head{5, ""}));
  CHECK(refuses(original, audit::chain_head{0, std::string(64, 'f')}));
  CHECK(refuses(original, audit::chain_head{-1, ""}));
}
