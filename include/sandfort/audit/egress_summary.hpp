#pragma once
// Egress decisions in the audit chain without one event per connection: a sandbox that opens a
// thousand tunnels a minute must not write a thousand events a minute. Decisions are counted
// per (organization, sandbox, host, port, decision) and written every interval as one `egress`
// event per key into that organization's chain (docs/audit.md: "Egress decisions").
//
// Decisions that name no organization one could trust (a refused credential of an unknown
// sandbox, a request refused before its credential was read) and those of an organization
// deleted before they were written go to the operator's chain, with the organization in details.

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sandfort/audit/journal.hpp"
#include "sandfort/store/org_store.hpp"

namespace sandfort::audit {

// One decision of the egress proxy, as the chain needs it (the proxy's egress_event, copied by
// the daemon so that this module does not depend on the proxy).
struct egress_decision {
  std::string org_id;      // empty: none one could trust
  std::string sandbox_id;  // the credential's sandbox, or the id a refused credential claimed
  std::string host;
  unsigned short port = 0;
  bool allowed = false;
  std::string reason;  // deny: why; allow: how the tunnel ended
  std::string source;  // the connection's address
  unsigned long long bytes_in = 0, bytes_out = 0;
  // Organization secrets the proxy put into the request (docs/secrets.md), by name: counted per
  // name in the key's event ("injected": {"openai": 3}); never a value.
  std::vector<std::string> injected = {};
};

class egress_summary {
 public:
  egress_summary(store::database& db, journal& j, const clock& clk) : db_(db), orgs_(db), journal_(j), clk_(clk) {}

  // One decision. Cheap: no database access.
  void note(const egress_decision& d);
  // Writes what was counted since the last flush, all chains in one transaction, and starts
  // counting afresh; returns how many events were written. What could not be written is kept.
  result<int> flush();
  std::size_t pending() const { return tallies_.size(); }

  // Bounds: beyond max_keys distinct keys per interval further decisions are counted in one
  // overflow key per organization; beyond max_reasons distinct reasons per key, as "other".
  static constexpr std::size_t max_keys = 10'000;
  static constexpr std::size_t max_reasons = 8;
  static constexpr std::size_t max_field = 255;  // bytes kept of a claimed id or a host

 private:
  using key = std::tuple<std::string, std::string, std::string, unsigned short, bool>;
  struct tally {
    long long count = 0;
    unsigned long long bytes_in = 0, bytes_out = 0;
    std::string first, last, source;
    std::map<std::string, long long> reasons;
    std::map<std::string, long long> injected;
  };
  result<std::string> chain_of(const std::string& org_id, std::map<std::string, std::string>& seen);

  store::database& db_;  // write admission, transactions
  store::org_store orgs_;
  journal& journal_;
  const clock& clk_;
  std::map<key, tally> tallies_;
};

}  // namespace sandfort::audit
