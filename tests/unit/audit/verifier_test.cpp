// The verifier against every way of tampering with a stored chain.

#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>

#include "sandfort/audit/checkpoint.hpp"
#include "sandfort/audit/verifier.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::testing;
using events = std::vector<audit::event_record>;
using checkpoints = std::vector<audit::checkpoint_record>;

namespace {

const std::string ts = "2025-06-01T00:00:00Z";

struct keys {
  testing::temp_dir dir;
  audit::signing_key key = load_key(dir.file("audit.key"));
  audit::signing_key other = load_key(dir.file("other.key"));
  audit::public_key pk = *audit::public_key::from_pem(key.public_key_pem());

  // The signed checkpoint of chain at seq (0: before the first event).
  audit::checkpoint_record at(const events& chain, std::int64_t seq, const std::string& org = org_a) const {
    const std::string hash = seq == 0 ? "" : chain[static_cast<std::size_t>(seq - 1)].hash;
    return audit::make_checkpoint(org, audit::chain_head{seq, hash}, ts, key);
  }
};

audit::verify_report run(audit::chain_verifier& v, const events& chain, const checkpoints& cps,
                         const audit::public_key& pk) {
  for (const auto& e : chain)
    if (!v.feed(e)) {
      CHECK_FALSE(v.feed(e));  // stays broken
      break;
    }
  return v.finish(cps, pk);
}

// Both ways of keeping hashes (every one; only the checkpoints') must find the same thing.
audit::verify_report verify(const events& chain, const checkpoints& cps, const audit::public_key& pk,
                            const std::string& org = org_a) {
  audit::chain_verifier all(org);
  audit::chain_verifier watched(org, cps);
  auto r = run(all, chain, cps, pk);
  auto w = run(watched, chain, cps, pk);
  CHECK(w.ok == r.ok);
  CHECK(w.first_bad_seq == r.first_bad_seq);
  CHECK(w.reason == r.reason);
  CHECK(w.events == r.events);
  CHECK(r.org_id == org);
  CHECK(r.checkpoints == static_cast<std::int64_t>(cps.size()));
  if (!r.ok) UNSCOPED_INFO("reason: " << r.reason);
  return r;
}

// Rewrites events from index `from` on with fresh, consistent hashes, as an attacker without the key would.
void rehash_from(events& chain, std::size_t from) {
  for (std::size_t i = from; i < chain.size(); ++i) {
    const audit::chain_head head =
        i == 0 ? audit::chain_head{} : audit::chain_head{chain[i - 1].seq, chain[i - 1].hash};
    REQUIRE(audit::seal(chain[i], head));
  }
}

}  // namespace

TEST_CASE("an intact chain verifies against its checkpoints, given in any order") {
  keys k;
  const auto chain = testing::sealed_chain(org_a, 10);
  const auto r = verify(chain, {k.at(chain, 10), k.at(chain, 3), k.at(chain, 0), k.at(chain, 7)}, k.pk);
  CHECK(r.ok);
  CHECK(r.events == 10);
  CHECK(r.first_bad_seq == 0);
  CHECK(r.reason.empty());
  CHECK(r.head_hash == chain.back().hash);

  CHECK(verify(chain, {}, k.pk).ok);
  const auto empty = verify({}, {k.at(chain, 0)}, k.pk);
  CHECK(empty.ok);
  CHECK(empty.head_hash == audit::genesis_hash());
}

TEST_CASE("an edited field: hash mismatch at that seq") {
  keys k;
  auto chain = testing::sealed_chain(org_a, 10);
  const checkpoints cps = {k.at(chain, 10)};
  SECTION("actor") { chain[4].actor = "key-00000000000000bb"; }
  SECTION("outcome") { chain[4].outcome = "denied"; }
  SECTION("ts") { chain[4].ts = "2025-01-02T03:04:06Z"; }
  SECTION("details") { chain[4].details = R"({"image":"python:3.12","n":6})"; }
  SECTION("the stored hash itself") { chain[4].hash[0] = chain[4].hash[0] == 'a' ? 'b' : 'a'; }
  const auto r = verify(chain, cps, k.pk);
  CHECK_FALSE(r.ok);
  CHECK(r.first_bad_seq == 5);
  CHECK(r.events == 4);
  CHECK_THAT(r.reason, Catch::Contains("seq 5") && Catch::Contains("edited"));
}

TEST_CASE("details stored other than canonically are an edit, even with the same meaning") {
  keys k;
  auto chain = testing::sealed_chain(org_a, 6);
  SECTION("whitespace") { chain[2].details = R"({"image": "python:3.12", "n": 3})"; }
  SECTION("a duplicate key hiding behind the hashed one") { chain[2].details = R"({"image":"evil","image":"python:3.12","n":3})"; }
  SECTION("not JSON") { chain[2].details = "{"; }
  const auto r = verify(chain, {}, k.pk);
  CHECK_FALSE(r.ok);
  CHECK(r.first_bad_seq == 3);
  CHECK_THAT(r.reason, Catch::Contains("details") && Catch::Contains("canonical"));
}

TEST_CASE("a deleted event") {
  keys k;
  auto chain = testing::sealed_chain(org_a, 10);
  const checkpoints cps = {k.at(chain, 10)};
  chain.erase(chain.begin() + 4);
  SECTION("leaves a gap in seq") {
    const auto r = verify(chain, cps, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 5);
    CHECK_THAT(r.reason, Catch::Contains("seq 5 is missing") && Catch::Contains("deleted"));
  }
  SECTION("with the later events renumbered: its successor no longer chains") {
    for (std::size_t i = 4; i < chain.size(); ++i) --chain[i].seq;
    const auto r = verify(chain, cps, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 5);
    CHECK_THAT(r.reason, Catch::Contains("does not chain"));
  }
}

TEST_CASE("an inserted event") {
  keys k;
  auto chain = testing::sealed_chain(org_a, 10);
  const checkpoints cps = {k.at(chain, 10)};
  // A well-formed event that chains on event 4: only its successor can show it does not belong.
  auto forged = testing::sample_event(org_a, 99);
  REQUIRE(audit::seal(forged, audit::chain_head{4, chain[3].hash}));
  SECTION("with the later events renumbered") {
    for (std::size_t i = 4; i < chain.size(); ++i) ++chain[i].seq;
    chain.insert(chain.begin() + 4, forged);
    const auto r = verify(chain, cps, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 6);
    CHECK_THAT(r.reason, Catch::Contains("seq 6") && Catch::Contains("does not chain"));
  }
  SECTION("with a seq that is already taken") {
    chain.insert(chain.begin() + 4, forged);
    const auto r = verify(chain, cps, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 5);
    CHECK_THAT(r.reason, Catch::Contains("seq 5 appears again"));
  }
}

TEST_CASE("reordered events") {
  keys k;
  auto chain = testing::sealed_chain(org_a, 10);
  const checkpoints cps = {k.at(chain, 10)};
  SECTION("their seqs swapped, so they are read in the new order") {
    std::swap(chain[4], chain[5]);
    std::swap(chain[4].seq, chain[5].seq);
    const auto r = verify(chain, cps, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 5);
    CHECK_THAT(r.reason, Catch::Contains("seq 5") && Catch::Contains("does not chain"));
  }
  SECTION("read out of seq order") {
    std::swap(chain[4], chain[5]);
    const auto r = verify(chain, cps, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 5);
  }
}

TEST_CASE("an event moved from another organization") {
  keys k;
  auto chain = testing::sealed_chain(org_a, 10);
  const auto other = testing::sealed_chain(org_b, 10);
  const checkpoints cps = {k.at(chain, 10)};
  chain[4] = other[4];  // same seq, a valid event of B's chain
  SECTION("as it was") {
    const auto r = verify(chain, cps, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 5);
    CHECK_THAT(r.reason, Catch::Contains("belongs to organization " + org_b));
  }
  SECTION("relabelled as ours") {
    chain[4].org_id = org_a;
    const auto r = verify(chain, cps, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 5);
    CHECK_THAT(r.reason, Catch::Contains("another organization"));
  }
  SECTION("relabelled and chained onto ours, its own hash kept") {
    chain[4].org_id = org_a;
    chain[4].prev_hash = chain[3].hash;
    const auto r = verify(chain, cps, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 5);
    CHECK_THAT(r.reason, Catch::Contains("edited"));
  }
}

TEST_CASE("a cut tail: the chain ends before the latest checkpoint") {
  keys k;
  auto chain = testing::sealed_chain(org_a, 10);
  const checkpoints cps = {k.at(chain, 4), k.at(chain, 10)};
  chain.resize(8);
  auto r = verify(chain, cps, k.pk);
  CHECK_FALSE(r.ok);
  CHECK(r.first_bad_seq == 9);
  CHECK(r.events == 8);
  CHECK_THAT(r.reason, Catch::Contains("ends at seq 8") && Catch::Contains("seq 10") && Catch::Contains("cut off"));

  r = verify({}, cps, k.pk);  // everything deleted
  CHECK_FALSE(r.ok);
  CHECK(r.first_bad_seq == 1);
}

TEST_CASE("a suffix rewritten and re-hashed consistently: the chain no longer reaches the checkpoint") {
  keys k;
  auto chain = testing::sealed_chain(org_a, 10);
  const checkpoints cps = {k.at(chain, 5), k.at(chain, 10)};
  chain[7].outcome = "denied";
  rehash_from(chain, 7);
  CHECK(verify(chain, {}, k.pk).ok);  // without a checkpoint the rewrite is invisible
  const auto r = verify(chain, cps, k.pk);
  CHECK_FALSE(r.ok);
  CHECK(r.first_bad_seq == 10);
  CHECK(r.events == 10);
  CHECK_THAT(r.reason, Catch::Contains("hash at seq 10 differs") && Catch::Contains("after seq 5 were rewritten"));

  SECTION("also when the rewritten chain is longer than the checkpoint") {
    auto longer = chain;
    auto extra = testing::sample_event(org_a, 11);
    REQUIRE(audit::seal(extra, audit::chain_head{10, longer.back().hash}));
    longer.push_back(extra);
    CHECK(verify(longer, cps, k.pk).first_bad_seq == 10);
  }
}

TEST_CASE("forged checkpoints") {
  keys k;
  const auto chain = testing::sealed_chain(org_a, 10);
  auto cp = k.at(chain, 6);
  SECTION("signed by another key, under its own key id") {
    cp = audit::make_checkpoint(org_a, audit::chain_head{6, chain[5].hash}, ts, k.other);
    const auto r = verify(chain, {k.at(chain, 10), cp}, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 6);
    CHECK_THAT(r.reason, Catch::Contains("names key " + k.other.key_id()) && Catch::Contains(k.key.key_id()));
  }
  SECTION("signed by another key under the trusted key's id") {
    cp.signature = k.other.sign(audit::checkpoint_message(cp));
    const auto r = verify(chain, {cp}, k.pk);
    CHECK_FALSE(r.ok);
    CHECK(r.first_bad_seq == 6);
    CHECK_THAT(r.reason, Catch::Contains("invalid signature"));
  }
  SECTION("a genuine checkpoint altered to match a rewritten chain") {
    cp.head_hash = std::string(64, 'c');
    CHECK_FALSE(verify(chain, {cp}, k.pk).ok);
    cp = k.at(chain, 6);
    cp.seq = 5;
    cp.head_hash = chain[4].hash;
    CHECK(verify(chain, {cp}, k.pk).first_bad_seq == 5);
    cp = k.at(chain, 6);
    cp.ts = "2030-01-01T00:00:00Z";
    CHECK_THAT(verify(chain, {cp}, k.pk).reason, Catch::Contains("invalid signature"));
  }
  SECTION("no signature") {
    cp.signature.clear();
    CHECK(verify(chain, {cp}, k.pk).first_bad_seq == 6);
  }
}

TEST_CASE("a checkpoint of another organization") {
  keys k;
  const auto chain = testing::sealed_chain(org_a, 10);
  const auto other = testing::sealed_chain(org_b, 10);
  const auto r = verify(chain, {k.at(chain, 10), k.at(other, 7, org_b)}, k.pk);
  CHECK_FALSE(r.ok);
  CHECK(r.first_bad_seq == 7);
  CHECK_THAT(r.reason, Catch::Contains("for organization " + org_b));
}

TEST_CASE("the report names the lowest bad seq among the chain's and the checkpoints' problems") {
  keys k;
  auto chain = testing::sealed_chain(org_a, 10);
  auto forged = k.at(chain, 3);
  forged.signature = k.other.sign(audit::checkpoint_message(forged));
  chain[7].actor = "someone else";
  const auto r = verify(chain, {k.at(chain, 6), forged}, k.pk);
  CHECK(r.first_bad_seq == 3);
  CHECK(r.events == 7);

  const auto s = verify(chain, {k.at(chain, 9)}, k.pk);  // beyond the break: nothing to compare
  CHECK(s.first_bad_seq == 8);
  CHECK_THAT(s.reason, Catch::Contains("edited"));
}

TEST_CASE("a verifier told which checkpoints to expect refuses one it was not told about") {
  keys k;
  const auto chain = testing::sealed_chain(org_a, 10);
  audit::chain_verifier v(org_a, {k.at(chain, 10)});
  for (const auto& e : chain) REQUIRE(v.feed(e));
  CHECK(v.finish({k.at(chain, 10)}, k.pk).ok);
  const auto r = v.finish({k.at(chain, 10), k.at(chain, 4)}, k.pk);
  CHECK_FALSE(r.ok);
  CHECK(r.first_bad_seq == 4);
  CHECK_THAT(r.reason, Catch::Contains("not announced"));
}

TEST_CASE("100,000 events stream through the verifier") {
  keys k;
  constexpr int count = 100000;
  // Sealed and fed one at a time: only the verifier's state grows.
  audit::chain_verifier v(org_a);
  audit::chain_head head;
  checkpoints cps;
  std::chrono::steady_clock::duration feeding{};
  for (int n = 1; n <= count; ++n) {
    auto e = testing::sample_event(org_a, n);
    REQUIRE(audit::seal(e, head));
    head = {e.seq, e.hash};
    if (n % 10000 == 0) cps.push_back(audit::make_checkpoint(org_a, head, ts, k.key));
    const auto start = std::chrono::steady_clock::now();
    const bool fed = v.feed(e);
    feeding += std::chrono::steady_clock::now() - start;
    if (!fed) FAIL("broken at " << n);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto r = v.finish(cps, k.pk);
  const auto finishing = std::chrono::steady_clock::now() - start;
  CHECK(r.ok);
  CHECK(r.events == count);
  CHECK(r.head_hash == head.hash);
  using ms = std::chrono::milliseconds;
  std::cout << "audit verifier: " << count << " events fed in " << std::chrono::duration_cast<ms>(feeding).count()
            << " ms, " << cps.size() << " checkpoints checked in " << std::chrono::duration_cast<ms>(finishing).count()
            << " ms\n";
}
