#pragma once
// `sandfortd audit-verify`: recomputes every organization's audit chain from the database, offline,
// and checks it against the signed checkpoints (the database's and an exported file's). Made for
// cron: exit 0 when every chain is intact, 1 when one is broken, 2 on usage or I/O errors.

#include <iosfwd>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace sandfort::daemon {

struct audit_verify_options {
  std::string config_file;
  std::vector<std::string> sets;  // key=value overrides, as for serve
  std::string org;                // id or name; empty: every organization
  std::string checkpoints_file;   // exported checkpoints (JSON lines)
  std::string public_key_file;    // PEM; empty: derived from the signing key file of the config
  bool quiet = false;             // print only broken chains and errors
};

// Adds the subcommand to app, its flags bound to o.
CLI::App* add_audit_verify_command(CLI::App& app, audit_verify_options& o);

int audit_verify(const audit_verify_options& o, std::ostream& out, std::ostream& err);

}  // namespace sandfort::daemon
