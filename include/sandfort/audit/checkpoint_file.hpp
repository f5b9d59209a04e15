#pragma once
// Checkpoints as JSON lines: the API's form, and the export file that `sandfortd audit-verify
// --checkpoints` and `sandfort audit verify` check a chain against. Needs no database.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandfort/audit/records.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::audit {

// {org_id, seq, head_hash, ts, key_id, signature}: the API's and the export file's form.
nlohmann::json checkpoint_json(const audit::checkpoint_record& c);
// The reverse; invalid_argument naming the field that is missing or of the wrong type.
result<audit::checkpoint_record> checkpoint_from_json(const nlohmann::json& j);

// Appends one line (checkpoint_json) to path: O_APPEND, created 0600, fsynced before returning.
result<void> export_checkpoint(const std::string& path, const audit::checkpoint_record& c);
// Every checkpoint of an export file (blank lines skipped); invalid_argument naming the line.
result<std::vector<audit::checkpoint_record>> read_checkpoint_file(const std::string& path);

}  // namespace sandfort::audit
