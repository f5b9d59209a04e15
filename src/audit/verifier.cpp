#include "sandfort/audit/verifier.hpp"

#include <algorithm>

#include "event_form.hpp"

#include "sandfort/audit/chain.hpp"
#include "sandfort/audit/checkpoint.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::audit {

using detail::seq_text;

namespace {

int hex_value(char c) noexcept { return c <= '9' ? c - '0' : c - 'a' + 10; }

struct problem {
  std::int64_t seq = 0;
  std::string reason;
};

// Lowest seq wins; among equals the one found first.
void note(std::optional<problem>& worst, std::int64_t seq, std::string reason) {
  if (!worst || seq < worst->seq) worst = problem{seq, std::move(reason)};
}

}  // namespace

chain_verifier::chain_verifier(std::string org_id) : org_id_(std::move(org_id)), last_hash_(genesis_hash()) {}

chain_verifier::chain_verifier(std::string org_id, const std::vector<audit::checkpoint_record>& checkpoints)
    : chain_verifier(std::move(org_id)) {
  watched_.emplace();
  for (const auto& c : checkpoints) watched_->insert(c.seq);
}

void chain_verifier::fail(std::int64_t seq, std::string reason) {
  broken_ = true;
  bad_seq_ = seq;
  reason_ = std::move(reason);
}

bool chain_verifier::feed(const audit::event_record& e) {
  if (broken_) return false;
  const std::int64_t expected = last_seq_ + 1;
  const std::string at = seq_text(e.seq);
  if (e.seq > expected) {
    fail(expected, seq_text(expected) + " is missing (the next stored event has " + at + "): events were deleted");
  } else if (e.seq < 1) {
    fail(expected, "an event with invalid " + at + " stands where " + seq_text(expected) + " belongs");
  } else if (e.seq < expected) {
    fail(e.seq, at + " appears again after " + seq_text(last_seq_) + ": events were reordered, duplicated or inserted");
  } else if (e.org_id != org_id_) {
    fail(e.seq, "the event at " + at + " belongs to organization " + e.org_id + ": moved from another organization");
  } else if (e.prev_hash != last_hash_) {
    fail(e.seq, "the event at " + at + " does not chain to its predecessor (prev_hash differs): an event before it "
                "was deleted, inserted or reordered, or it was moved from another organization");
  }
  if (broken_) return false;

  auto forms = detail::canonical_forms_of(e);
  if (!forms) {
    fail(e.seq, "the event at " + at + " has no canonical form (" + forms.err().message + "): edited");
    return false;
  }
  if (forms->details != e.details) {
    fail(e.seq, "the details of the event at " + at + " are not in canonical form: edited");
    return false;
  }
  std::string hash = sha256_hex(last_hash_ + forms->event);
  if (hash != e.hash) {
    fail(e.seq, "the hash of the event at " + at + " does not match its content: a field was edited");
    return false;
  }
  keep(e.seq, hash);
  last_seq_ = e.seq;
  last_hash_ = std::move(hash);
  return true;
}

void chain_verifier::keep(std::int64_t seq, const std::string& hash) {
  if (watched_) {
    if (watched_->count(seq) != 0) kept_[seq] = hash;
    return;
  }
  digest d{};
  for (std::size_t i = 0; i < d.size(); ++i)
    d[i] = static_cast<unsigned char>(hex_value(hash[2 * i]) << 4 | hex_value(hash[2 * i + 1]));
  all_.push_back(d);
}

std::optional<std::string> chain_verifier::hash_at(std::int64_t seq) const {
  if (seq == 0) return genesis_hash();
  if (seq < 0 || seq > last_seq_) return std::nullopt;
  if (watched_) {
    const auto it = kept_.find(seq);
    if (it == kept_.end()) return std::nullopt;
    return it->second;
  }
  const auto& d = all_[static_cast<std::size_t>(seq - 1)];
  return to_hex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

verify_report chain_verifier::finish(const std::vector<audit::checkpoint_record>& checkpoints,
                                     const public_key& pk) const {
  std::optional<problem> worst;
  if (broken_) worst = problem{bad_seq_, reason_};

  std::vector<const audit::checkpoint_record*> sorted;
  for (const auto& c : checkpoints) sorted.push_back(&c);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->seq < b->seq; });

  std::int64_t last_matching = 0;  // highest checkpoint seq the chain was seen to reach
  for (const auto* c : sorted) {
    const std::string at = "the checkpoint at " + seq_text(c->seq);
    const auto message = try_checkpoint_message(*c);
    if (c->org_id != org_id_) {
      note(worst, c->seq, at + " is for organization " + c->org_id + ", not " + org_id_);
    } else if (c->key_id != pk.key_id()) {
      note(worst, c->seq, at + " names key " + c->key_id + ", not the trusted key " + pk.key_id() +
                              ": forged or signed by another key");
    } else if (!message || !pk.verify(*message, c->signature)) {
      note(worst, c->seq, at + " has an invalid signature: forged or altered");
    } else if (broken_ && c->seq >= bad_seq_) {
      continue;  // the chain is already broken before it: nothing to compare with
    } else if (c->seq > last_seq_) {
      note(worst, last_seq_ + 1, "the chain ends at " + seq_text(last_seq_) + " but a signed checkpoint covers " +
                                     seq_text(c->seq) + ": the tail was cut off");
    } else if (const auto hash = hash_at(c->seq); !hash) {
      note(worst, c->seq, at + " was not announced to the verifier before the events were fed");
    } else if (*hash != c->head_hash) {
      note(worst, c->seq, "the chain's hash at " + seq_text(c->seq) + " differs from the signed checkpoint: events after " +
                              seq_text(last_matching) + " were rewritten");
    } else {
      last_matching = c->seq;
    }
  }

  verify_report r;
  r.org_id = org_id_;
  r.events = last_seq_;
  r.checkpoints = static_cast<std::int64_t>(checkpoints.size());
  r.head_hash = last_hash_;
  if (worst) {
    r.ok = false;
    r.first_bad_seq = worst->seq;
    r.reason = std::move(worst->reason);
  }
  return r;
}

}  // namespace sandfort::audit
