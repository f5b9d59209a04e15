#pragma once
// Signing organizations' chain heads: periodically for every organization, or on demand for one.
// A checkpoint is only signed for a chain that still extends the latest checkpoint (the events
// since then are re-hashed first), so the key never vouches for a chain that was cut or edited
// since it last signed. With an export file, each new checkpoint is appended there (one JSON line,
// fsynced) before it is stored: a file outside the state directory that survives whoever rewrites
// the database, and that `sandfortd audit-verify --checkpoints` checks the chain against.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/audit/signing.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::audit {

// Signs org_id's head at time ts when it moved since the latest checkpoint (nullopt when it did
// not, or when the chain is empty), appends it to export_path when not empty, then stores it.
// conflict, naming the seq, when the latest checkpoint is not this key's valid signature or the
// chain no longer extends it: that is for audit-verify and a human, not for a new signature.
// internal when the export file cannot be written (then nothing is stored either).
result<std::optional<store::audit_checkpoint>> checkpoint_org(store::database& db, const std::string& org_id,
                                                              const signing_key& key, const std::string& ts,
                                                              const std::string& export_path = "");

// checkpoint_org in two halves, so that the long one can run on another connection and thread
// (api::background_reader) while the short one writes on the daemon's own:
// 1. reads only: the head to sign when it moved since the latest checkpoint (nullopt when not),
//    after the same checks as checkpoint_org;
struct head_to_sign {
  std::string org_id;
  store::audit_head head;
};
result<std::optional<head_to_sign>> find_head_to_sign(store::database& db, const std::string& org_id,
                                                      const signing_key& key);
// 2. signs it, exports and stores it; nullopt when a checkpoint at or beyond it was stored since.
result<std::optional<store::audit_checkpoint>> sign_head(store::database& db, const head_to_sign& h,
                                                         const signing_key& key, const std::string& ts,
                                                         const std::string& export_path = "");

// checkpoint_org for every organization with events; returns how many checkpoints were made.
// One organization's failure does not stop the others: the error then names every failed one.
result<int> checkpoint_all(store::database& db, const signing_key& key, const clock& clk,
                           const std::string& export_path);

// {org_id, seq, head_hash, ts, key_id, signature}: the API's and the export file's form.
nlohmann::json checkpoint_json(const store::audit_checkpoint& c);
// The reverse; invalid_argument naming the field that is missing or of the wrong type.
result<store::audit_checkpoint> checkpoint_from_json(const nlohmann::json& j);

// Appends one line (checkpoint_json) to path: O_APPEND, created 0600, fsynced before returning.
result<void> export_checkpoint(const std::string& path, const store::audit_checkpoint& c);
// Every checkpoint of an export file (blank lines skipped); invalid_argument naming the line.
result<std::vector<store::audit_checkpoint>> read_checkpoint_file(const std::string& path);

}  // namespace sandfort::audit
