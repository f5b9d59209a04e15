#pragma once
// Recomputes one organization's chain event by event and checks it against the signed
// checkpoints. Events stream through: memory is a few hashes, not the chain.
//
// What a passing verification proves: every stored event is the one that was hashed into the
// chain, in its place, and the chain still reaches every signed checkpoint, so nothing up to
// the latest checkpoint was edited, deleted, inserted, reordered, moved between organizations
// or cut off. What it does not: events after the latest checkpoint can be cut off or rewritten
// unnoticed, and whoever holds both the database and the signing key can rewrite everything.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sandfort/audit/signing.hpp"
#include "sandfort/audit/records.hpp"

namespace sandfort::audit {

struct verify_report {
  bool ok = true;
  std::string org_id;
  std::int64_t events = 0;       // events verified before the first break (all of them when ok)
  std::int64_t checkpoints = 0;  // checkpoints given to finish()
  std::int64_t first_bad_seq = 0;
  std::string reason;     // empty when ok
  std::string head_hash;  // the recomputed hash of the last event verified (genesis when none)
};

class chain_verifier {
 public:
  // Keeps the hash of every event, 32 bytes each, so that finish() can check any checkpoint.
  explicit chain_verifier(std::string org_id);
  // Keeps only the hashes at these checkpoints' seqs; finish() must get no other checkpoint.
  chain_verifier(std::string org_id, const std::vector<audit::checkpoint_record>& checkpoints);

  // Feed the events in the order stored (ascending seq); false once the chain is broken (then stop).
  bool feed(const audit::event_record& e);

  // After the last event. Each checkpoint, in any order: of this organization, signed by pk
  // (key id and signature), and the chain had exactly its head_hash at its seq; a checkpoint
  // beyond the last event means the tail was cut. The report names the lowest bad seq found.
  verify_report finish(const std::vector<audit::checkpoint_record>& checkpoints, const public_key& pk) const;

 private:
  using digest = std::array<unsigned char, 32>;
  void fail(std::int64_t seq, std::string reason);
  void keep(std::int64_t seq, const std::string& hash);
  std::optional<std::string> hash_at(std::int64_t seq) const;

  std::string org_id_;
  std::int64_t last_seq_ = 0;
  std::string last_hash_;
  bool broken_ = false;
  std::int64_t bad_seq_ = 0;
  std::string reason_;
  std::optional<std::set<std::int64_t>> watched_;  // nullopt: keep every hash in all_
  std::vector<digest> all_;                        // all_[seq - 1]
  std::map<std::int64_t, std::string> kept_;       // the watched seqs' hashes
};

}  // namespace sandfort::audit
