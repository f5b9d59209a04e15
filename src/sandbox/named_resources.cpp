// Volumes and snapshots, where their shapes are the same (named_resources.hpp).
#include <cctype>
#include <spdlog/spdlog.h>

#include "sandfort/core/ids.hpp"
#include "sandfort/sandbox/named_resources.hpp"

namespace sandfort::sandbox {

template <typename Record, typename View, typename Page>
named_resource_service<Record, View, Page>::named_resource_service(const resource_kind<Record, View>& kind,
                                                                   store::database& db, docker::engine& engine,
                                                                   const clock& clk, const guardrails_config& limits)
    : kind_(kind),
      db_(db),
      resources_(db),
      guardrails_(db),
      engine_(engine),
      clock_(clk),
      limits_(limits),
      journal_(db, clk) {}

template <typename Record, typename View, typename Page>
result<void> named_resource_service<Record, View, Page>::check_name(const std::string& name) const {
  const auto fits = [&] {
    if (name.empty() || name.size() > 63 || !std::isalnum(static_cast<unsigned char>(name[0]))) return false;
    for (char c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
    return name.rfind(kind_.id_prefix, 0) != 0;
  };
  if (fits()) return {};
  return make_error(errc::invalid_argument,
                    std::string("name must be 1-63 characters of letters, digits, '-', '_', '.', start with a letter "
                                "or digit, and not start with '") +
                        kind_.id_prefix + "'");
}

template <typename Record, typename View, typename Page>
result<admitted_create> named_resource_service<Record, View, Page>::admit(const std::string& org_id,
                                                                          const std::string& name,
                                                                          const audit::actor& who) {
  // A taken name is refused before Docker is asked (the insert checks again).
  if (auto taken = (resources_.*kind_.get)(org_id, name); taken)
    return make_error(errc::conflict, std::string(kind_.noun) + " name '" + name + "' is already used");
  else if (taken.err().code != errc::not_found)
    return std::move(taken).err();
  // The quota: the organization's rows not deleted and its creates still in flight.
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) return std::move(own).err();
  auto rows = (resources_.*kind_.count_live)(org_id);
  if (!rows) return std::move(rows).err();
  return admit_create(journal_, org_id, who,
                      {kind_.quota, limits_in_force(limits_, *own).*kind_.limit, *rows, "delete some", {}}, creating_);
}

template <typename Record, typename View, typename Page>
Record named_resource_service<Record, View, Page>::new_row(const std::string& org_id, const std::string& name) const {
  Record rec;
  rec.id = new_id(kind_.id_prefix);
  rec.org_id = org_id;
  rec.name = name;
  rec.state = "ready";
  return rec;
}

template <typename Record, typename View, typename Page>
task<void> named_resource_service<Record, View, Page>::keep(const Record& rec, const audit::actor& who,
                                                            const audit::record& created) {
  auto inserted = journal_.record_change(
      {rec.org_id}, who, [&] { return (resources_.*kind_.insert)(rec); }, [&] { return created; });
  if (!inserted) {
    error failed = std::move(inserted).err();
    co_return co_await discard(rec, std::move(failed));
  }
  co_return ok_t{};
}

template <typename Record, typename View, typename Page>
boost::asio::awaitable<error> named_resource_service<Record, View, Page>::discard(const Record& rec, error why) {
  const std::string& name = rec.*kind_.object_name;
  if (auto r = co_await (engine_.*kind_.remove_object)(name); !r && r.err().code != errc::not_found)
    spdlog::warn("{} {}: could not remove {} {} after a failed create: {}", kind_.noun, rec.id, kind_.object, name,
                 r.err().message);
  co_return why;
}

template <typename Record, typename View, typename Page>
result<Record> named_resource_service<Record, View, Page>::ready(const std::string& org_id,
                                                                 const std::string& id_or_name) {
  auto row = (resources_.*kind_.get)(org_id, id_or_name);
  if (!row) {
    if (row.err().code != errc::not_found) return std::move(row).err();
    return make_error(errc::not_found, std::string(kind_.noun) + " " + id_or_name + " not found");
  }
  if (row->state != "ready")
    return make_error(errc::conflict, std::string(kind_.noun) + " " + id_or_name + " is being deleted");
  return row;
}

template <typename Record, typename View, typename Page>
result<Page> named_resource_service<Record, View, Page>::list(const std::string& org_id,
                                                              const name_page_request& req) {
  auto rows = (resources_.*kind_.list)(org_id, req.cursor, req.limit + 1);  // one past the page: is there more?
  if (!rows) return std::move(rows).err();
  Page page;
  for (std::size_t i = 0; i < rows->size() && i < req.limit; ++i) page.items.push_back(kind_.view((*rows)[i]));
  if (rows->size() > req.limit && !page.items.empty()) page.next_cursor = page.items.back().name;
  return page;
}

template <typename Record, typename View, typename Page>
result<View> named_resource_service<Record, View, Page>::get(const std::string& org_id,
                                                             const std::string& id_or_name) {
  auto row = (resources_.*kind_.get)(org_id, id_or_name);
  if (!row) return std::move(row).err();
  return kind_.view(*row);
}

template <typename Record, typename View, typename Page>
task<void> named_resource_service<Record, View, Page>::remove(const std::string& org_id,
                                                              const std::string& id_or_name,
                                                              const audit::actor& who) {
  auto row = (resources_.*kind_.get)(org_id, id_or_name);
  if (!row) co_return std::move(row).err();
  const std::string noun = kind_.noun;
  // Checked and marked in one transaction: from here no create can use it (ready() takes ready
  // ones only), and Docker is asked only once no live sandbox holds it.
  if (row->state == "ready") {
    auto tx = db_.begin();
    if (!tx) co_return std::move(tx).err();
    auto holder = (resources_.*kind_.holder)((*row).*kind_.holder_key);
    if (!holder) co_return std::move(holder).err();
    if (*holder)
      co_return make_error(errc::conflict, noun + " " + row->name + " " + kind_.held + " sandbox " + **holder +
                                               " (delete that sandbox first)");
    if (auto r = (resources_.*kind_.set_state)(org_id, row->id, "deleting", {"ready"}, format_time(clock_.now())); !r)
      co_return r;
    if (auto r = tx->commit(); !r) co_return r;
  }
  auto removed = co_await (engine_.*kind_.remove_object)((*row).*kind_.object_name);
  if (!removed && removed.err().code != errc::not_found) {
    // Still there (Docker unreachable, or a container holds it): usable again.
    (void)(resources_.*kind_.set_state)(org_id, row->id, "ready", {"deleting"}, format_time(clock_.now()));
    co_return removed;
  }
  auto r = journal_.record_change(
      {org_id}, who,
      [&] { return (resources_.*kind_.set_state)(org_id, row->id, "deleted", {"deleting"}, format_time(clock_.now())); },
      [&] { return audit::record{noun + ".delete", row->id, "ok", {{"name", row->name}}}; });
  if (!r) co_return r;
  spdlog::info("{} {} deleted (org {})", noun, row->id, org_id);
  co_return ok_t{};
}

template class named_resource_service<store::volume_record, volume_view, volume_page>;
template class named_resource_service<store::snapshot_record, snapshot_view, snapshot_page>;

}  // namespace sandfort::sandbox
