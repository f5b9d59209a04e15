#include "sandfort/audit/checkpointer.hpp"

#include "event_form.hpp"
#include "sandfort/audit/chain.hpp"
#include "sandfort/audit/checkpoint.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::audit {

using detail::seq_text;

namespace {

// The latest checkpoint must be this key's valid signature: the new one will rest on it.
result<void> check_signed_by(const audit::checkpoint_record& c, const signing_key& key) {
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
result<audit::chain_head> rehash_since(store::audit_store events, const std::string& org_id, audit::chain_head from) {
  if (from.seq == 0) from.hash = genesis_hash();
  audit::chain_head head = from;
  std::optional<error> problem;
  const auto broken = [&](std::int64_t seq, const std::string& why) {
    problem = make_error(errc::conflict, "audit: the chain of " + org_id + " is broken at " + seq_text(seq) + " (" +
                                             why + "); nothing is signed until audit-verify has been run");
    return false;
  };
  auto scanned = events.scan_audit_events(org_id, from.seq + 1, [&](const audit::event_record& e) {
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

result<std::optional<head_to_sign>> find_head_to_sign(store::audit_store events, const std::string& org_id,
                                                      const signing_key& key) {
  auto latest = events.latest_audit_checkpoint(org_id);
  if (!latest) return std::move(latest).err();
  audit::chain_head from;
  if (*latest) {
    if (auto r = check_signed_by(**latest, key); !r) return std::move(r).err();
    from = {(*latest)->seq, (*latest)->head_hash};
  }
  auto head = rehash_since(events, org_id, from);
  if (!head) return std::move(head).err();
  if (head->seq == from.seq) return std::optional<head_to_sign>();  // nothing new (or nothing at all) to sign
  return std::optional<head_to_sign>(head_to_sign{org_id, *head});
}

result<std::optional<audit::checkpoint_record>> sign_head(store::audit_store events, const head_to_sign& h,
                                                          const signing_key& key, const std::string& ts,
                                                          const std::string& export_path) {
  using none = std::optional<audit::checkpoint_record>;
  auto latest = events.latest_audit_checkpoint(h.org_id);
  if (!latest) return std::move(latest).err();
  if (*latest && (*latest)->seq >= h.head.seq) return none();  // signed meanwhile
  auto c = make_checkpoint(h.org_id, h.head, ts, key);
  // Exported first: a checkpoint the file has and the database lacks still binds the chain; the
  // reverse would leave a gap in the only copy an attacker of the database cannot reach.
  if (!export_path.empty())
    if (auto r = export_checkpoint(export_path, c); !r) return std::move(r).err();
  if (auto r = events.insert_audit_checkpoint(c); !r) return std::move(r).err();
  return none(std::move(c));
}

result<std::optional<audit::checkpoint_record>> checkpoint_org(store::audit_store events, const std::string& org_id,
                                                               const signing_key& key, const std::string& ts,
                                                               const std::string& export_path) {
  auto h = find_head_to_sign(events, org_id, key);
  if (!h) return std::move(h).err();
  if (!*h) return std::optional<audit::checkpoint_record>();
  return sign_head(events, **h, key, ts, export_path);
}

result<int> checkpoint_all(store::audit_store events, const signing_key& key, const clock& clk,
                           const std::string& export_path) {
  auto orgs = events.audit_org_ids();
  if (!orgs) return std::move(orgs).err();
  int made = 0;
  std::string failures;
  for (const auto& org_id : *orgs) {
    auto c = checkpoint_org(events, org_id, key, format_time(clk.now()), export_path);
    if (!c) failures += (failures.empty() ? "" : "; ") + c.err().message;
    else if (*c) ++made;
  }
  if (!failures.empty())
    return make_error(errc::internal, std::to_string(made) + " checkpoints made, but: " + failures);
  return made;
}

}  // namespace sandfort::audit
