#pragma once
// Signing organizations' chain heads: periodically for every organization, or on demand for one.
// A checkpoint is only signed for a chain that still extends the latest checkpoint (the events
// since then are re-hashed first), so the key never vouches for a chain that was cut or edited
// since it last signed. With an export file, each new checkpoint is appended there (one JSON line,
// fsynced) before it is stored: a file outside the state directory that survives whoever rewrites
// the database, and that `sandfortd audit-verify --checkpoints` checks the chain against.

#include <optional>
#include <string>
#include <vector>

#include "sandfort/audit/checkpoint_file.hpp"
#include "sandfort/audit/signing.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/store/audit_store.hpp"

namespace sandfort::audit {

// Signs org_id's head at time ts when it moved since the latest checkpoint (nullopt when it did
// not, or when the chain is empty), appends it to export_path when not empty, then stores it.
// conflict, naming the seq, when the latest checkpoint is not this key's valid signature or the
// chain no longer extends it: that is for audit-verify and a human, not for a new signature.
// internal when the export file cannot be written (then nothing is stored either).
result<std::optional<audit::checkpoint_record>> checkpoint_org(store::audit_store events, const std::string& org_id,
                                                               const signing_key& key, const std::string& ts,
                                                               const std::string& export_path = "");

// checkpoint_org in two halves, so that the long one can run on another connection and thread
// (api::background_reader) while the short one writes on the daemon's own:
// 1. reads only: the head to sign when it moved since the latest checkpoint (nullopt when not),
//    after the same checks as checkpoint_org;
struct head_to_sign {
  std::string org_id;
  audit::chain_head head;
};
result<std::optional<head_to_sign>> find_head_to_sign(store::audit_store events, const std::string& org_id,
                                                      const signing_key& key);
// 2. signs it, exports and stores it; nullopt when a checkpoint at or beyond it was stored since.
result<std::optional<audit::checkpoint_record>> sign_head(store::audit_store events, const head_to_sign& h,
                                                          const signing_key& key, const std::string& ts,
                                                          const std::string& export_path = "");

// checkpoint_org for every organization with events; returns how many checkpoints were made.
// One organization's failure does not stop the others: the error then names every failed one.
result<int> checkpoint_all(store::audit_store events, const signing_key& key, const clock& clk,
                           const std::string& export_path);

}  // namespace sandfort::audit
