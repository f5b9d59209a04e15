#pragma once
// A signed checkpoint: the key holder's statement "organization O's chain had head_hash at seq N
// at time ts". A bare hash chain cannot show that its tail was cut off or re-written with fresh
// hashes; a chain that no longer reaches a signed checkpoint can.

#include <string>

#include "sandfort/audit/chain.hpp"
#include "sandfort/audit/signing.hpp"
#include "sandfort/audit/records.hpp"

namespace sandfort::audit {

// What is signed: the canonical JSON (rules in chain.hpp) of {head_hash, key_id, org_id, seq, ts},
// or invalid_argument when a field is not valid UTF-8.
result<std::string> try_checkpoint_message(const audit::checkpoint_record& c);
// The same for checkpoints known to be well-formed; throws std::invalid_argument (a bug) if not.
std::string checkpoint_message(const audit::checkpoint_record& c);

// A checkpoint of head (an empty chain's head_hash is genesis), signed by key at time ts.
audit::checkpoint_record make_checkpoint(const std::string& org_id, const audit::chain_head& head,
                                         const std::string& ts, const signing_key& key);

}  // namespace sandfort::audit
