#pragma once
// `sandfortd backup` and `sandfortd restore` of everything a restore needs: the database copy
// (store::backup_database), each live volume's contents and each live snapshot's image, taken
// from the Docker engine by what the copy's rows name and only when the Docker object carries
// this instance's labels. docs/operations.md, "Backups", says how they are used.

#include <iosfwd>
#include <string>

#include "sandfort/core/config.hpp"

namespace sandfort::daemon {

struct backup_options {
  std::string to;
  bool force = false;
  bool database_only = false;  // `to` is then one database file, as before volumes were included
};

struct restore_options {
  std::string from;
  bool force = false;  // replace an existing database
};

// Exit codes: 0 done; 1 failed (nothing left behind); 2 refused (target exists, no database);
// 3 written, but a row's volume or image could not be copied (each one is named on err).
int run_backup(const config& cfg, const backup_options& o, std::ostream& out, std::ostream& err);
// Exit codes: 0 every live row's volume and image is in the engine; 1 failed; 2 refused;
// 3 restored, but the rows named on err point at a volume or image that is not there.
int run_restore(const config& cfg, const restore_options& o, std::ostream& out, std::ostream& err);

}  // namespace sandfort::daemon
