#pragma once
// Appending to an organization's audit chain, in the same SQLite transaction as the change the
// event records: either both are in the database or neither is, whatever kills the process.

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::audit {

// Who acted, as the chain names them: "key:<key id>", "oidc:<sub>@<issuer>", "system", or
// "anonymous" (an authentication failure), with the request and the client's address.
struct actor {
  std::string name = "system";
  std::string request_id;
  std::string source;
};

// The daemon itself (a TTL, a container that died). A reference to one object, so that a default
// argument of a coroutine never makes a temporary (GCC 12 mishandles those across co_await).
const actor& system_actor();

// One event before it is sealed: the chain adds org, seq, time and hashes.
struct record {
  std::string action;  // "sandbox.create", "api_key.revoke", "auth.failure", ...
  std::string target;  // "sbx-…", "key-…", "org-…"; empty when there is none
  std::string outcome = "ok";
  nlohmann::json details = nlohmann::json::object();
};

// The chain's canonical form has no floats (their text is not the same in every language):
// this turns each float in j into its decimal text ("1.5"), recursively.
nlohmann::json floats_as_text(nlohmann::json j);

class journal {
 public:
  journal(store::database& db, const clock& clk) : db_(db), events_(db), clk_(clk) {}

  // Appends inside a transaction the caller holds open (db.begin()).
  result<audit::event_record> append(const std::string& org_id, const actor& who, const record& r);

  // The change and its event in one transaction: `change` makes the store writes and returns
  // their result; only when it succeeded is `describe` asked for the event (given the change's
  // value, if it has one) and appended to each chain in `org_ids` (an action of the superadmin on
  // an organization goes into both chains); then everything is committed, or nothing is.
  template <typename Change, typename Describe>
  auto record_change(const std::vector<std::string>& org_ids, const actor& who, Change&& change, Describe&& describe)
      -> decltype(change()) {
    using outcome = decltype(change());
    auto tx = db_.begin();
    if (!tx) return std::move(tx).err();
    outcome changed = change();
    if (!changed) return changed;
    record r;
    if constexpr (std::is_same_v<outcome, result<void>>)
      r = describe();
    else
      r = describe(*changed);
    for (const auto& org_id : org_ids)
      if (auto appended = append(org_id, who, r); !appended) return std::move(appended).err();
    if (auto committed = tx->commit(); !committed) return std::move(committed).err();
    return changed;
  }

  // An event that stands alone (an action outside the database: a command run, a file written).
  result<audit::event_record> record_event(const std::string& org_id, const actor& who, const record& r);

 private:
  store::database& db_;  // transactions
  store::audit_store events_;
  const clock& clk_;
};

}  // namespace sandfort::audit
