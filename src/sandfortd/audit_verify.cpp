#include "audit_verify.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "sandfort/audit/checkpointer.hpp"
#include "sandfort/audit/verifier.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/org_store.hpp"

extern char** environ;

namespace sandfort::daemon {

namespace {

constexpr int exit_intact = 0, exit_broken = 1, exit_usage = 2;

// A usage or I/O problem: exit 2 with this message.
struct usage_error {
  std::string message;
};

config load_verify_config(const audit_verify_options& o) {
  config_overrides overrides;
  for (const auto& kv : o.sets) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) throw usage_error{"--set expects key=value, got '" + kv + "'"};
    overrides[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto cfg = load_config(o.config_file, overrides, environ);
  if (!cfg) throw usage_error{cfg.err().message};
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (auto r = finalize_config(*cfg, ec ? "." : exe.parent_path().string()); !r) throw usage_error{r.err().message};
  return std::move(cfg).value();
}

// The key the checkpoints must be signed with: the auditor's pinned PEM, or the daemon's own
// key file (never created here: a fresh key would make every checkpoint look forged).
audit::public_key trusted_key(const audit_verify_options& o, const config& cfg) {
  if (!o.public_key_file.empty()) {
    std::ifstream in(o.public_key_file, std::ios::binary);
    if (!in) throw usage_error{"cannot read public key file " + o.public_key_file};
    std::stringstream pem;
    pem << in.rdbuf();
    auto pk = audit::public_key::from_pem(pem.str());
    if (!pk) throw usage_error{o.public_key_file + ": " + pk.err().message};
    return std::move(*pk);
  }
  auto key = audit::signing_key::load(cfg.audit.key_path);
  if (!key && key.err().code == errc::not_found)
    throw usage_error{key.err().message + "; give the daemon's public key with --public-key FILE"};
  if (!key) throw usage_error{key.err().message + " (or give the public key with --public-key FILE)"};
  auto pk = audit::public_key::from_pem(key->public_key_pem());
  if (!pk) throw usage_error{pk.err().message};
  return std::move(*pk);
}

template <typename T>
T must(result<T> r) {
  if (!r) throw usage_error{r.err().message};
  return std::move(r).value();
}

// Every checkpoint of org: the database's, then the file's that the database lacks.
std::vector<audit::checkpoint_record> checkpoints_of(store::audit_store audits, const std::string& org,
                                                     const std::vector<audit::checkpoint_record>& from_file) {
  std::vector<audit::checkpoint_record> out;
  for (std::int64_t after = std::numeric_limits<std::int64_t>::min();;) {
    auto page = must(audits.list_audit_checkpoints(org, after, 10000));
    if (page.empty()) break;
    after = page.back().seq;
    out.insert(out.end(), page.begin(), page.end());
  }
  const auto same = [](const audit::checkpoint_record& a, const audit::checkpoint_record& b) {
    return a.org_id == b.org_id && a.seq == b.seq && a.head_hash == b.head_hash && a.ts == b.ts &&
           a.key_id == b.key_id && a.signature == b.signature;
  };
  const std::size_t stored = out.size();
  for (const auto& c : from_file) {
    if (c.org_id != org) continue;
    const auto end = out.begin() + static_cast<std::ptrdiff_t>(stored);
    if (std::none_of(out.begin(), end, [&](const auto& s) { return same(s, c); })) out.push_back(c);
  }
  return out;
}

// The organizations to verify, id → name (empty when the orgs table does not know it).
std::map<std::string, std::string> orgs_to_verify(store::database& db, const std::string& wanted,
                                                  const std::vector<audit::checkpoint_record>& from_file) {
  store::org_store orgs(db);
  std::map<std::string, std::string> all;
  for (const auto& o : must(orgs.list_orgs())) all[o.id] = o.name;
  for (const auto& id : must(store::audit_store(db).audit_org_ids())) all.emplace(id, "");
  for (const auto& c : from_file) all.emplace(c.org_id, "");
  for (auto& [id, name] : all)
    if (name.empty())
      if (auto o = orgs.get_org(id); o) name = o->name;  // a deleted organization keeps its row
  if (wanted.empty()) return all;
  if (auto o = orgs.get_org(wanted); o) return {{o->id, o->name}};
  if (auto o = orgs.find_org_by_name(wanted); o) return {{o->id, o->name}};
  if (auto it = all.find(wanted); it != all.end()) return {*it};
  throw usage_error{"no organization " + wanted + " in the database or the checkpoint file"};
}

bool verify_org(store::audit_store audits, const std::string& org, const std::string& name,
                const std::vector<audit::checkpoint_record>& from_file, const audit::public_key& pk, bool quiet,
                std::ostream& out) {
  const auto cps = checkpoints_of(audits, org, from_file);
  audit::chain_verifier verifier(org, cps);
  // From the lowest seq there is, so that a row with an impossible seq is seen too.
  if (auto r = audits.scan_audit_events(org, std::numeric_limits<std::int64_t>::min(),
                                        [&](const audit::event_record& e) { return verifier.feed(e); });
      !r)
    throw usage_error{r.err().message};
  const auto report = verifier.finish(cps, pk);
  const std::string who = name.empty() ? org : org + " (" + name + ")";
  if (!report.ok) {
    out << who << " BROKEN at seq " << report.first_bad_seq << ": " << report.reason << "\n";
    return false;
  }
  if (quiet) return true;
  out << who << " ok: " << report.events << " events, " << report.checkpoints << " checkpoints";
  std::int64_t signed_up_to = -1;
  for (const auto& c : cps) signed_up_to = std::max(signed_up_to, c.seq);
  if (report.events > 0 && signed_up_to < report.events)
    out << " (" << (report.events - std::max<std::int64_t>(signed_up_to, 0)) << " after the latest checkpoint)";
  out << "\n";
  return true;
}

}  // namespace

CLI::App* add_audit_verify_command(CLI::App& app, audit_verify_options& o) {
  auto* cmd = app.add_subcommand("audit-verify", "recompute every organization's audit chain and check it against "
                                                 "the signed checkpoints; exit 0 intact, 1 broken, 2 error");
  cmd->add_option("-c,--config", o.config_file, "JSON configuration file (the database and key paths come from it)");
  cmd->add_option("--set", o.sets, "override any setting: --set key=value (e.g. database=/backup/sandfort.db)");
  cmd->add_option("--org", o.org, "only this organization (id or name)");
  cmd->add_option("--checkpoints", o.checkpoints_file, "exported checkpoints (audit.export_path), JSON lines");
  cmd->add_option("--public-key", o.public_key_file,
                  "the daemon's public key (PEM, GET /v1/audit/public-key); default: derived from audit.key_path");
  cmd->add_flag("-q,--quiet", o.quiet, "print only broken chains and errors");
  return cmd;
}

int audit_verify(const audit_verify_options& o, std::ostream& out, std::ostream& err) {
  try {
    const auto cfg = load_verify_config(o);
    if (!std::filesystem::exists(cfg.database)) throw usage_error{"no database at " + cfg.database};
    const auto pk = trusted_key(o, cfg);
    std::vector<audit::checkpoint_record> from_file;
    if (!o.checkpoints_file.empty()) from_file = must(audit::read_checkpoint_file(o.checkpoints_file));
    auto db = must(store::database::open(cfg.database));
    bool intact = true;
    for (const auto& [org, name] : orgs_to_verify(*db, o.org, from_file))
      intact = verify_org(*db, org, name, from_file, pk, o.quiet, out) && intact;
    out.flush();
    return intact ? exit_intact : exit_broken;
  } catch (const usage_error& e) {
    err << "sandfortd audit-verify: " << e.message << "\n";
    return exit_usage;
  } catch (const std::exception& e) {
    err << "sandfortd audit-verify: " << e.what() << "\n";
    return exit_usage;
  }
}

}  // namespace sandfort::daemon
