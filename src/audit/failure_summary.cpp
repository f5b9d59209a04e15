#include "sandfort/audit/failure_summary.hpp"

namespace sandfort::audit {

namespace {
}

void failure_summary::note(const std::string& source, const std::string& reason) {
  auto key = std::make_pair(source, reason);
  if (counts_.size() >= max_pairs && !counts_.contains(key)) key = {"*", "other (too many distinct sources)"};
  tally& t = counts_[key];
  const std::string now = format_time(clk_.now());
  if (t.count++ == 0) t.first = now;
  t.last = now;
}

result<int> failure_summary::flush() {
  if (counts_.empty()) return 0;
  // On a full state disk the counts wait here (bounded) and are written once space returns:
  // they would spend the reserve that deletes need.
  if (auto room = db_.admit(store::write_kind::change); !room) return std::move(room).err();
  auto org = orgs_.find_org_by_name(store::operator_org_name);
  if (!org) return std::move(org).err();  // not bootstrapped yet: keep counting
  auto tx = db_.begin();
  if (!tx) return std::move(tx).err();
  int written = 0;
  for (const auto& [key, t] : counts_) {
    actor anonymous{"anonymous", "", key.first};
    record r{"auth.failures", "", "denied", {{"reason", key.second}, {"count", t.count}, {"first", t.first}, {"last", t.last}}};
    if (auto e = journal_.append(org->id, anonymous, r); !e) return std::move(e).err();
    ++written;
  }
  if (auto committed = tx->commit(); !committed) return std::move(committed).err();
  counts_.clear();
  return written;
}

}  // namespace sandfort::audit
