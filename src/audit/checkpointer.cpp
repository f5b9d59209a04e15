#include "sandfort/audit/checkpointer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "event_form.hpp"
#include "sandfort/audit/chain.hpp"
#include "sandfort/audit/checkpoint.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::audit {

using detail::seq_text;

namespace {

// The latest checkpoint must be this key's valid signature: the new one will rest on it.
result<void> check_signed_by(const store::audit_checkpoint& c, const signing_key& key) {
  const std::string where = "audit: the latest checkpoint of " + c.org_id + " (" + seq_text(c.seq) + ")";
  if (c.key_id != key.key_id())
    return make_error(errc::conflict, where + " names key " + c.key_id + ", not this daemon's key " + key.key_id() +
                                          "; nothing is signed until audit-verify has been run");
  auto pk = public_key::from_pem(key.public_key_pem());
  const auto message = try_checkpoint_message(c);
  if (!pk || !message || !pk->verify(*message, c.signature))
    return make_error(errc::conflict, where + " has an invalid signature; nothing is signed until audit-verify "
                                              "has been run");
  return {};
}

// The head after re-hashing org_id's events that follow `from` (a checkpoint's head, or the
// empty chain's). conflict, naming the first bad seq, when they do not chain onto it.
result<store::audit_head> rehash_since(store::database& db, const std::string& org_id, store::audit_head from) {
  if (from.seq == 0) from.hash = genesis_hash();
  store::audit_head head = from;
  std::optional<error> problem;
  const auto broken = [&](std::int64_t seq, const std::string& why) {
    problem = make_error(errc::conflict, "audit: the chain of " + org_id + " is broken at " + seq_text(seq) + " (" +
                                             why + "); nothing is signed until audit-verify has been run");
    return false;
  };
  auto scanned = db.scan_audit_events(org_id, from.seq + 1, [&](const store::audit_event& e) {
    if (e.seq != head.seq + 1) return broken(head.seq + 1, "missing");
    if (e.prev_hash != head.hash)
      return broken(e.seq, head.seq == from.seq && from.seq > 0 ? "it does not extend the latest checkpoint"
                                                                : "prev_hash differs");
    auto forms = detail::canonical_forms_of(e);
    if (!forms || forms->details != e.details || sha256_hex(head.hash + forms->event) != e.hash)
      return broken(e.seq, "its hash does not match its content");
    head = {e.seq, e.hash};
    return true;
  });
  if (!scanned) return std::move(scanned).err();
  if (problem) return std::move(*problem);
  return head;
}

}  // namespace

result<std::optional<head_to_sign>> find_head_to_sign(store::database& db, const std::string& org_id,
                                                      const signing_key& key) {
  auto latest = db.latest_audit_checkpoint(org_id);
  if (!latest) return std::move(latest).err();
  store::audit_head from;
  if (*latest) {
    if (auto r = check_signed_by(**latest, key); !r) return std::move(r).err();
    from = {(*latest)->seq, (*latest)->head_hash};
  }
  auto head = rehash_since(db, org_id, from);
  if (!head) return std::move(head).err();
  if (head->seq == from.seq) return std::optional<head_to_sign>();  // nothing new (or nothing at all) to sign
  return std::optional<head_to_sign>(head_to_sign{org_id, *head});
}

result<std::optional<store::audit_checkpoint>> sign_head(store::database& db, const head_to_sign& h,
                                                         const signing_key& key, const std::string& ts,
                                                         const std::string& export_path) {
  using none = std::optional<store::audit_checkpoint>;
  auto latest = db.latest_audit_checkpoint(h.org_id);
  if (!latest) return std::move(latest).err();
  if (*latest && (*latest)->seq >= h.head.seq) return none();  // signed meanwhile
  auto c = make_checkpoint(h.org_id, h.head, ts, key);
  // Exported first: a checkpoint the file has and the database lacks still binds the chain; the
  // reverse would leave a gap in the only copy an attacker of the database cannot reach.
  if (!export_path.empty())
    if (auto r = export_checkpoint(export_path, c); !r) return std::move(r).err();
  if (auto r = db.insert_audit_checkpoint(c); !r) return std::move(r).err();
  return none(std::move(c));
}

result<std::optional<store::audit_checkpoint>> checkpoint_org(store::database& db, const std::string& org_id,
                                                              const signing_key& key, const std::string& ts,
                                                              const std::string& export_path) {
  auto h = find_head_to_sign(db, org_id, key);
  if (!h) return std::move(h).err();
  if (!*h) return std::optional<store::audit_checkpoint>();
  return sign_head(db, **h, key, ts, export_path);
}

result<int> checkpoint_all(store::database& db, const signing_key& key, const clock& clk,
                           const std::string& export_path) {
  auto orgs = db.audit_org_ids();
  if (!orgs) return std::move(orgs).err();
  int made = 0;
  std::string failures;
  for (const auto& org_id : *orgs) {
    auto c = checkpoint_org(db, org_id, key, format_time(clk.now()), export_path);
    if (!c) failures += (failures.empty() ? "" : "; ") + c.err().message;
    else if (*c) ++made;
  }
  if (!failures.empty())
    return make_error(errc::internal, std::to_string(made) + " checkpoints made, but: " + failures);
  return made;
}

nlohmann::json checkpoint_json(const store::audit_checkpoint& c) {
  return {{"org_id", c.org_id}, {"seq", c.seq},         {"head_hash", c.head_hash},
          {"ts", c.ts},         {"key_id", c.key_id}, {"signature", c.signature}};
}

result<store::audit_checkpoint> checkpoint_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return make_error(errc::invalid_argument, "a checkpoint must be a JSON object");
  // The mistake worth naming: a line of the event export (`sandfort audit export`) given as a checkpoint.
  if (!j.contains("head_hash") && j.contains("prev_hash") && j.contains("hash"))
    return make_error(errc::invalid_argument,
                      "an audit event, not a checkpoint: checkpoints are the lines of audit.export_path, of "
                      "GET /v1/audit/checkpoints or of `sandfort audit checkpoints -o FILE`");
  store::audit_checkpoint c;
  for (auto [name, field] : {std::pair{"org_id", &c.org_id}, std::pair{"head_hash", &c.head_hash},
                             std::pair{"ts", &c.ts}, std::pair{"key_id", &c.key_id},
                             std::pair{"signature", &c.signature}}) {
    auto it = j.find(name);
    if (it == j.end() || !it->is_string())
      return make_error(errc::invalid_argument, std::string("checkpoint field '") + name + "' must be a string");
    *field = it->get<std::string>();
  }
  auto seq = j.find("seq");
  if (seq == j.end() || !seq->is_number_integer())
    return make_error(errc::invalid_argument, "checkpoint field 'seq' must be an integer");
  c.seq = seq->get<std::int64_t>();
  return c;
}

result<void> export_checkpoint(const std::string& path, const store::audit_checkpoint& c) {
  const std::string line = checkpoint_json(c).dump() + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return make_error(errc::internal, "audit: cannot open checkpoint export file " + path + ": " + std::strerror(errno));
  // One write: with O_APPEND the line lands whole after whatever another writer appended.
  ssize_t n;
  do n = ::write(fd, line.data(), line.size());
  while (n < 0 && errno == EINTR);
  const int write_errno = errno;
  const bool synced = n == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  const int sync_errno = errno;
  ::close(fd);
  if (!synced) {
    const int e = n < 0 ? write_errno : sync_errno;
    return make_error(errc::internal, "audit: cannot append to checkpoint export file " + path + ": " +
                                          (n >= 0 && n != static_cast<ssize_t>(line.size()) ? "short write"
                                                                                            : std::strerror(e)));
  }
  return {};
}

result<std::vector<store::audit_checkpoint>> read_checkpoint_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::not_found, "cannot open checkpoint file " + path + ": " + std::strerror(errno));
  std::vector<store::audit_checkpoint> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto c = parsed.is_discarded() ? result<store::audit_checkpoint>(make_error(errc::invalid_argument, "not JSON"))
                                   : checkpoint_from_json(parsed);
    if (!c) return make_error(errc::invalid_argument, path + ":" + std::to_string(number) + ": " + c.err().message);
    out.push_back(std::move(*c));
  }
  if (in.bad()) return make_error(errc::internal, "cannot read checkpoint file " + path);
  return out;
}

}  // namespace sandfort::audit
