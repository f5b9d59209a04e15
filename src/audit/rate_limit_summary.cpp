#include "sandfort/audit/rate_limit_summary.hpp"

namespace sandfort::audit {

namespace {
constexpr const char* overflow_principal = "*";
}  // namespace

void rate_limit_summary::note(const rate_limit_refusal& r) {
  auto key = std::make_tuple(r.org_id, r.principal, r.org_bucket);
  if (tallies_.size() >= max_pairs && !tallies_.contains(key))
    key = {r.org_id, std::string(overflow_principal), r.org_bucket};
  tally& t = tallies_[key];
  const std::string now = format_time(clk_.now());
  if (t.count++ == 0) {
    t.first = now;
    t.source = r.source;
  }
  t.last = now;
  t.limit = r.limit;
}

// The organization's own chain while it exists; the operator's once it is deleted.
result<std::string> rate_limit_summary::chain_of(const std::string& org_id) {
  auto o = orgs_.get_org(org_id);
  if (!o && o.err().code != errc::not_found) return std::move(o).err();
  if (o && o->state != "deleted") return o->id;
  auto op = orgs_.find_org_by_name(store::operator_org_name);
  if (!op) return std::move(op).err();
  return op->id;
}

result<int> rate_limit_summary::flush() {
  if (tallies_.empty()) return 0;
  // On a full state disk the counts wait here (bounded) and are written once space returns:
  // they would spend the reserve that deletes need.
  if (auto room = db_.admit(store::write_kind::change); !room) return std::move(room).err();
  auto tx = db_.begin();
  if (!tx) return std::move(tx).err();
  int written = 0;
  for (const auto& [key, t] : tallies_) {
    const auto& [org_id, principal, org_bucket] = key;
    auto chain = chain_of(org_id);
    if (!chain) return std::move(chain).err();
    nlohmann::json details = {{"count", t.count},
                              {"first", t.first},
                              {"last", t.last},
                              {"rate_per_s", t.limit.rate_per_s},
                              {"burst", t.limit.burst}};
    if (*chain != org_id) details["org_id"] = org_id;
    if (principal == overflow_principal) details["principals"] = "too many distinct principals: counted together";
    if (org_bucket) details["bucket"] = "organization";
    record r{"rate_limit.exceeded", "", "denied", floats_as_text(std::move(details))};
    const actor who{principal == overflow_principal ? "anonymous" : principal, "", t.source};
    if (auto e = journal_.append(*chain, who, r); !e) return std::move(e).err();
    ++written;
  }
  if (auto committed = tx->commit(); !committed) return std::move(committed).err();
  tallies_.clear();
  return written;
}

}  // namespace sandfort::audit
