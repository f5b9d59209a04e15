#pragma once
// An online copy of the database (SQLite's backup API) while sandfortd runs: a consistent
// snapshot of one moment, taken beside the daemon's own connection without stopping it.
// `sandfortd backup --to FILE` (docs/operations.md says how to restore).

#include <cstdint>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::store {

// A volume or snapshot row of the copy that is not deleted: what a restore needs in Docker.
struct storage_row {
  std::string id;
  std::string org_id;
  std::string name;
  std::string docker_ref;  // a volume's Docker volume name; a snapshot's image reference
};

struct backup_report {
  std::int64_t bytes = 0;
  std::int64_t organizations = 0;
  std::int64_t api_keys = 0;
  std::int64_t sandboxes = 0;     // rows, deleted ones included (history is kept)
  std::int64_t audit_events = 0;
  std::string instance_id;  // the io.sandfort.instance label of this database's Docker objects
  std::vector<storage_row> volumes;
  std::vector<storage_row> snapshots;
};

// Copies the database at `source` into a new file `dest` (mode 0600: key hashes and the audit log
// are in it). The copy is written beside `dest` and renamed into place only once it is complete
// and passes SQLite's integrity check, so `dest` is never a half-written file. `replace`: an
// existing `dest` is overwritten; otherwise it is an error.
result<backup_report> backup_database(const std::string& source, const std::string& dest, bool replace);

}  // namespace sandfort::store
