#pragma once
// The audit chain's records as they are hashed, signed, stored and verified. Plain data, so that
// what needs no database (the offline verifier of `sandfort audit verify`, the checkpoint file)
// reads them without the store; the store keeps them exactly as given (store/audit_store.hpp).

#include <cstdint>
#include <string>

namespace sandfort::audit {

// One event of an organization's audit chain, stored exactly as given: the audit module computes
// seq, prev_hash and hash, and the store never rewrites a field (a verifier rehashes these bytes).
struct event_record {
  std::string org_id;
  std::int64_t seq = 0;  // 1, 2, 3, ... per organization
  std::string ts;        // RFC 3339, UTC
  std::string actor;
  std::string action;
  std::string target;
  std::string outcome;
  std::string request_id;
  std::string source;
  std::string details = "{}";  // JSON object text, as given
  std::string prev_hash;
  std::string hash;
};

// The newest event of a chain. seq 0 and an empty hash: no events yet.
struct chain_head {
  std::int64_t seq = 0;
  std::string hash;
};

// A signature over (org_id, seq, head_hash, ts) by the key named key_id.
struct checkpoint_record {
  std::string org_id;
  std::int64_t seq = 0;
  std::string head_hash;
  std::string ts;
  std::string key_id;
  std::string signature;
};

}  // namespace sandfort::audit
