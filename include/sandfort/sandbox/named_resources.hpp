#pragma once
// What volumes and snapshots (volumes.hpp, snapshots.hpp) have in common: an organization's named
// resources, each a row named uniquely per organization among those not deleted (ready |
// deleting | deleted) over one Docker object of a random name. Their shape is the same above
// that object too, and is here once: a name's rules, a create's taken-name and quota checks, the
// row written after its object (and the object removed again when the row cannot be), a page by
// name, a lookup, and the delete — refused while a sandbox not deleted holds one, marked in the
// transaction that checks that, then the object, then the row. A kind is described once as data
// (resource_kind); how one is made (a Docker volume, a container committed) and what a create
// asks of it (mounts, an image) stay with each service.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/audit/journal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/config.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/guardrail_store.hpp"
#include "sandfort/store/resource_store.hpp"

namespace sandfort::sandbox {

// A kind of named resource: its words, its rows in the resource store, what holds one and its
// Docker object.
template <typename Record, typename View>
struct resource_kind {
  const char* noun;                  // "volume": messages, audit actions ("volume.delete"), logs
  const char* quota;                 // "volumes": its count quota (docs/guardrails.md)
  std::int64_t org_limits::*limit;   // that quota's limit
  const char* id_prefix;             // "vol-": its ids; no name may start with it
  View (*view)(const Record&);
  // Its rows.
  result<void> (store::resource_store::*insert)(const Record&);
  result<Record> (store::resource_store::*get)(const std::string& org_id, const std::string& id_or_name);
  result<std::vector<Record>> (store::resource_store::*list)(const std::string& org_id, const std::string& after_name,
                                                             std::size_t limit);
  result<void> (store::resource_store::*set_state)(const std::string& org_id, const std::string& id,
                                                   const std::string& state, const std::vector<std::string>& from,
                                                   const std::string& at);
  result<std::int64_t> (store::resource_store::*count_live)(const std::string& org_id);
  // The sandbox not deleted that holds one, found by the record's `holder_key`, and what it
  // does with it, for the delete's conflict ("is mounted by").
  result<std::optional<std::string>> (store::resource_store::*holder)(const std::string& key);
  std::string Record::*holder_key;
  const char* held;
  // Its Docker object: what logs call it ("Docker volume"), its name, how it is removed.
  const char* object;
  std::string Record::*object_name;
  task<void> (docker::engine::*remove_object)(const std::string& name);
};

// A service of one kind: list, get and remove for the api; for the kind's own create, the steps
// both take. The kind must outlive the service (a constant of the service's file).
template <typename Record, typename View, typename Page>
class named_resource_service {
 public:
  result<Page> list(const std::string& org_id, const name_page_request& req);
  result<View> get(const std::string& org_id, const std::string& id_or_name);
  // Conflict while a sandbox not deleted holds it; Docker refusing to remove the object leaves
  // it usable (ready) again.
  task<void> remove(const std::string& org_id, const std::string& id_or_name, const audit::actor& who);

 protected:
  // `limits`: the configured guardrails (the kind's quota), read at each create.
  named_resource_service(const resource_kind<Record, View>& kind, store::database& db, docker::engine& engine,
                         const clock& clk, const guardrails_config& limits);

  // A create's steps, in this order, each before Docker is asked:
  // the name: 1-63 characters of letters, digits, '-', '_', '.', from a letter or digit, not
  // starting with the kind's id prefix (an id-shaped name would make addressing ambiguous);
  result<void> check_name(const std::string& name) const;
  // a name not taken (conflict), then the quota: refused with 429 quota_exceeded when the
  // organization has that many not deleted, creates in flight included. Admitted, the create
  // counts as one in flight while the returned value lives.
  result<admitted_create> admit(const std::string& org_id, const std::string& name, const audit::actor& who);
  // The row to be: a new id of the kind, the organization, the name, ready.
  Record new_row(const std::string& org_id, const std::string& name) const;
  // Once its Docker object is made: its row, with `created` in the audit chain. The object
  // first, then the row: a row never names an object that does not exist; if the row cannot be
  // written, the object goes again.
  task<void> keep(const Record& rec, const audit::actor& who, const audit::record& created);
  // A failed create's object removed again; returns `why`.
  boost::asio::awaitable<error> discard(const Record& rec, error why);

  // For a create that uses one: the organization's ready one of that id or name; not_found, or
  // conflict while it is being deleted.
  result<Record> ready(const std::string& org_id, const std::string& id_or_name);

  const resource_kind<Record, View>& kind_;
  store::database& db_;  // transactions, the instance id
  store::resource_store resources_;
  store::guardrail_store guardrails_;
  docker::engine& engine_;
  const clock& clock_;
  const guardrails_config& limits_;
  audit::journal journal_;
  // Creates in flight per organization: checked against the quota and not yet rows. Docker is
  // asked between the check and the insert, so parallel creates would each count only the rows
  // and all pass; counting these as well, on the one I/O thread, lets no burst overshoot.
  // Shared with the creates, which may outlive the service at shutdown.
  std::shared_ptr<creates_in_flight> creating_ = std::make_shared<creates_in_flight>();
};

// Made for the two kinds in named_resources.cpp.
extern template class named_resource_service<store::volume_record, volume_view, volume_page>;
extern template class named_resource_service<store::snapshot_record, snapshot_view, snapshot_page>;

}  // namespace sandfort::sandbox
