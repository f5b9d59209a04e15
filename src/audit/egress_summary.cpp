#include "sandfort/audit/egress_summary.hpp"

#include <algorithm>

namespace sandfort::audit {

namespace {
constexpr const char* overflow_reason = "other";

// The chain holds integers up to 2^53 - 1 (chain.hpp); a counter never gets there, but a flush
// that could not be written would be retried for ever.
unsigned long long exact(unsigned long long n) { return std::min(n, (1ull << 53) - 1); }

std::string bounded(const std::string& s) {
  return s.size() <= egress_summary::max_field ? s : s.substr(0, egress_summary::max_field);
}
}  // namespace

void egress_summary::note(const egress_decision& d) {
  key k{d.org_id, bounded(d.sandbox_id), bounded(d.host), d.port, d.allowed};
  if (tallies_.size() >= max_keys && !tallies_.contains(k)) k = {d.org_id, "*", "*", 0, d.allowed};
  tally& t = tallies_[k];
  const std::string now = format_time(clk_.now());
  if (t.count++ == 0) {
    t.first = now;
    t.source = d.source;
  }
  t.last = now;
  t.bytes_in += d.bytes_in;
  t.bytes_out += d.bytes_out;
  const std::string reason = bounded(d.reason);
  ++t.reasons[t.reasons.size() < max_reasons || t.reasons.contains(reason) ? reason : overflow_reason];
  // A sandbox holds at most 16 secrets (sandbox::max_attached_secrets): the names are bounded.
  for (const auto& name : d.injected) ++t.injected[bounded(name)];
}

// The chain that takes org_id's decisions: its own while it exists, the operator's otherwise.
result<std::string> egress_summary::chain_of(const std::string& org_id, std::map<std::string, std::string>& seen) {
  if (auto it = seen.find(org_id); it != seen.end()) return it->second;
  std::string chain;
  if (!org_id.empty()) {
    auto o = orgs_.get_org(org_id);
    if (!o && o.err().code != errc::not_found) return std::move(o).err();
    if (o && o->state != "deleted") chain = o->id;
  }
  if (chain.empty()) {
    auto op = orgs_.find_org_by_name(store::operator_org_name);
    if (!op) return std::move(op).err();  // not bootstrapped yet: keep counting
    chain = op->id;
  }
  return seen[org_id] = chain;
}

result<int> egress_summary::flush() {
  if (tallies_.empty()) return 0;
  // On a full state disk the counts wait here (bounded) and are written once space returns:
  // they would spend the reserve that deletes need.
  if (auto room = db_.admit(store::write_kind::change); !room) return std::move(room).err();
  auto tx = db_.begin();
  if (!tx) return std::move(tx).err();
  std::map<std::string, std::string> chains;
  int written = 0;
  for (const auto& [k, t] : tallies_) {
    const auto& [org_id, sandbox_id, host, port, allowed] = k;
    auto chain = chain_of(org_id, chains);
    if (!chain) return std::move(chain).err();
    nlohmann::json reasons = nlohmann::json::object();
    for (const auto& [reason, n] : t.reasons) reasons[reason] = n;
    record r{"egress", sandbox_id, allowed ? "allowed" : "denied",
             {{"host", host}, {"port", port}, {"count", t.count}, {"first", t.first}, {"last", t.last},
              {"bytes_in", exact(t.bytes_in)}, {"bytes_out", exact(t.bytes_out)}, {"reasons", std::move(reasons)}}};
    if (!t.injected.empty()) {
      nlohmann::json injected = nlohmann::json::object();
      for (const auto& [name, n] : t.injected) injected[name] = n;
      r.details["injected"] = std::move(injected);
    }
    if (*chain != org_id) r.details["org_id"] = org_id;
    const actor sandbox{sandbox_id.empty() ? "anonymous" : "sandbox:" + sandbox_id, "", t.source};
    if (auto e = journal_.append(*chain, sandbox, r); !e) return std::move(e).err();
    ++written;
  }
  if (auto committed = tx->commit(); !committed) return std::move(committed).err();
  tallies_.clear();
  return written;
}

}  // namespace sandfort::audit
