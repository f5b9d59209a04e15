// Snapshots (snapshots.hpp): a sandbox's filesystem committed as an image of its organization's.
#include <spdlog/spdlog.h>

#include "sandfort/core/ids.hpp"
#include "sandfort/sandbox/snapshots.hpp"

#include "sandfort/docker/image_archive.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace {

bool valid_snapshot_name(const std::string& s) {
  if (s.empty() || s.size() > 63 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return s.rfind("snap-", 0) != 0;  // an id-shaped name would make addressing ambiguous
}

// Whether an image reference names a snapshot image ("sandfort-snap/…", with or without a
// registry in front): such images are reachable only through their organization's names.
bool names_snapshot_image(const std::string& ref) {
  const std::string part = std::string(snapshot_repository) + "/";
  if (ref.rfind(part, 0) == 0) return true;
  return ref.find("/" + part) != std::string::npos;
}

// A snapshot holds a filesystem and nothing of the container it came from (issue 30, §4): the
// committed image's layers under a config written here (docker::rewritten_image_config), loaded
// as repo_tag without a layer in the archive (the engine holds them all already). Measured
// here: 0.17 s for the load, whatever the image's size; docs/security.md.
boost::asio::awaitable<result<void>> load_rewritten(docker::engine& engine, const std::string& committed_id,
                                                    const std::string& repo_tag,
                                                    const std::map<std::string, std::string>& labels) {
  auto committed = co_await engine.inspect_image(committed_id);
  if (!committed) co_return std::move(committed).err();
  nlohmann::json parent;  // null: no runtime settings to keep
  if (!committed->parent.empty()) {
    auto made_from = co_await engine.inspect_image(committed->parent);
    if (!made_from) co_return std::move(made_from).err();
    parent = std::move(made_from->raw);
  }
  auto config = docker::rewritten_image_config(committed->raw, parent, labels);
  const auto layers = config["rootfs"]["diff_ids"].is_array() ? config["rootfs"]["diff_ids"].size() : 0;
  co_return co_await engine.load_image(docker::layerless_image_archive(config.dump(), repo_tag, layers));
}

snapshot_view to_snapshot_view(const store::snapshot_record& s) {
  return {s.id, s.name, s.size_bytes, s.source_sandbox_id, s.state, s.created_at, s.updated_at};
}

}  // namespace

snapshot_service::snapshot_service(store::database& db, docker::engine& engine, const clock& clk,
                                   const guardrails_config& limits, operation_marks& marks)
    : db_(db),
      resources_(db),
      sandboxes_(db),
      guardrails_(db),
      engine_(engine),
      clock_(clk),
      limits_(limits),
      journal_(db, clk),
      marks_(marks) {}

task<snapshot_view> snapshot_service::create(const std::string& org_id, const snapshot_create_request& req,
                                             const audit::actor& who) {
  if (!valid_snapshot_name(req.name))
    co_return make_error(errc::invalid_argument,
                         "name must be 1-63 characters of letters, digits, '-', '_', '.', start with a letter or "
                         "digit, and not start with 'snap-'");
  if (req.sandbox_id.empty()) co_return make_error(errc::invalid_argument, "sandbox_id is required");
  auto sbx = sandboxes_.get_sandbox(org_id, req.sandbox_id);
  if (!sbx) co_return std::move(sbx).err();
  if ((sbx->state != "started" && sbx->state != "paused" && sbx->state != "stopped") || sbx->container_id.empty())
    co_return make_error(errc::conflict, "sandbox " + sbx->id + " is " + sbx->state +
                                             ": only a started, paused or stopped sandbox can be snapshotted");
  // A taken name is refused before Docker is asked (the insert below checks again).
  if (auto taken = resources_.get_snapshot(org_id, req.name); taken)
    co_return make_error(errc::conflict, "snapshot name '" + req.name + "' is already used");
  else if (taken.err().code != errc::not_found)
    co_return std::move(taken).err();
  // The quota (docs/guardrails.md), before Docker is asked: the organization's snapshots not
  // deleted and its creates still in flight. From here to the insert (or the failure), this
  // create counts as one of those in flight (see creating_).
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) co_return std::move(own).err();
  auto rows = resources_.count_live_snapshots(org_id);
  if (!rows) co_return std::move(rows).err();
  auto in_flight = admit_create(journal_, org_id, who,
                                {"snapshots", limits_in_force(limits_, *own).max_snapshots, *rows, "delete some", {}},
                                creating_);
  if (!in_flight) co_return std::move(in_flight).err();

  store::snapshot_record rec;
  rec.id = new_id("snap-");
  rec.org_id = org_id;
  rec.name = req.name;
  const std::string repo = std::string(snapshot_repository) + "/" + random_hex(8);
  const std::string tag = "latest";
  rec.image_ref = repo + ":" + tag;
  rec.source_sandbox_id = sbx->id;
  rec.state = "ready";

  // Docker pauses a running container for the commit and thaws it after: those pause and
  // unpause events are ours, not a change of the sandbox's state (container_events.cpp).
  // The commit's own image keeps the container's whole configuration (environment, proxy
  // credential, labels naming the sandbox and its organization): it is untagged, labelled as the
  // commit of no snapshot (should sandfortd stop before it is removed below, reconciliation
  // removes it as an image without a row), and the snapshot's image is loaded beside it with a
  // config sandfortd writes (see load_rewritten).
  const std::map<std::string, std::string> commit_labels{{label_instance, db_.instance_id()},
                                                         {label_snapshot, rec.id + ".commit"}};
  const std::map<std::string, std::string> labels{{label_instance, db_.instance_id()}, {label_snapshot, rec.id}};
  const std::vector<std::string> no_env;
  const std::string no_repo;
  std::string committed_id;
  {
    auto marked = marks_.begin_operation(sbx->id);  // its pause and unpause events are ours
    auto committed = co_await engine_.commit_container(sbx->container_id, no_repo, no_repo, commit_labels, no_env);
    if (!committed) co_return std::move(committed).err();
    committed_id = *committed;
  }
  auto loaded = co_await load_rewritten(engine_, committed_id, rec.image_ref, labels);
  if (auto r = co_await engine_.remove_image(committed_id); !r && r.err().code != errc::not_found)
    spdlog::warn("snapshot {}: could not remove the commit's image {}: {}", rec.id, committed_id, r.err().message);
  // The image first, then the row: a row never names an image that does not exist. If the row
  // cannot be written, the image goes again.
  auto undo = [&](error e) -> boost::asio::awaitable<result<snapshot_view>> {
    if (auto r = co_await engine_.remove_image(rec.image_ref); !r && r.err().code != errc::not_found)
      spdlog::warn("snapshot {}: could not remove image {} after a failed create: {}", rec.id, rec.image_ref,
                   r.err().message);
    co_return e;
  };
  if (!loaded) {
    error failed = std::move(loaded).err();
    co_return co_await undo(std::move(failed));
  }
  auto size = co_await engine_.image_size(rec.image_ref);
  if (!size) {
    error failed = std::move(size).err();
    co_return co_await undo(std::move(failed));
  }
  rec.size_bytes = *size;
  rec.created_at = rec.updated_at = format_time(clock_.now());
  auto inserted = journal_.record_change(
      {org_id}, who, [&] { return resources_.insert_snapshot(rec); },
      [&] {
        return audit::record{"snapshot.create", rec.id, "ok",
                             {{"name", rec.name}, {"sandbox", rec.source_sandbox_id}, {"size_bytes", rec.size_bytes}}};
      });
  if (!inserted) {
    error failed = std::move(inserted).err();
    co_return co_await undo(std::move(failed));
  }
  spdlog::info("snapshot {} created from sandbox {} (org {}, image {})", rec.id, rec.source_sandbox_id, org_id,
               rec.image_ref);
  co_return to_snapshot_view(rec);
}

result<snapshot_page> snapshot_service::list(const std::string& org_id, const snapshot_list_request& req) {
  auto rows = resources_.list_snapshots(org_id, req.cursor, req.limit + 1);  // one past the page: is there more?
  if (!rows) return std::move(rows).err();
  snapshot_page page;
  for (std::size_t i = 0; i < rows->size() && i < req.limit; ++i) page.items.push_back(to_snapshot_view((*rows)[i]));
  if (rows->size() > req.limit && !page.items.empty()) page.next_cursor = page.items.back().name;
  return page;
}

result<snapshot_view> snapshot_service::get(const std::string& org_id, const std::string& id_or_name) {
  auto s = resources_.get_snapshot(org_id, id_or_name);
  if (!s) return std::move(s).err();
  return to_snapshot_view(*s);
}

task<void> snapshot_service::remove(const std::string& org_id, const std::string& id_or_name,
                                    const audit::actor& who) {
  auto s = resources_.get_snapshot(org_id, id_or_name);
  if (!s) co_return std::move(s).err();
  // Checked and marked in one transaction: from here no create can use it (resolve takes
  // ready snapshots only), and Docker is asked only once no live sandbox runs from it.
  if (s->state == "ready") {
    auto tx = db_.begin();
    if (!tx) co_return std::move(tx).err();
    auto holder = resources_.snapshot_used_by(s->image_ref);
    if (!holder) co_return std::move(holder).err();
    if (*holder)
      co_return make_error(errc::conflict, "snapshot " + s->name + " is used by sandbox " + **holder +
                                               " (delete that sandbox first)");
    if (auto r = resources_.set_snapshot_state(org_id, s->id, "deleting", {"ready"}, format_time(clock_.now())); !r)
      co_return r;
    if (auto r = tx->commit(); !r) co_return r;
  }
  auto removed = co_await engine_.remove_image(s->image_ref);
  if (!removed && removed.err().code != errc::not_found) {
    // Still there (Docker unreachable, or a container holds it): usable again.
    (void)resources_.set_snapshot_state(org_id, s->id, "ready", {"deleting"}, format_time(clock_.now()));
    co_return removed;
  }
  auto r = journal_.record_change(
      {org_id}, who,
      [&] { return resources_.set_snapshot_state(org_id, s->id, "deleted", {"deleting"}, format_time(clock_.now())); },
      [&] { return audit::record{"snapshot.delete", s->id, "ok", {{"name", s->name}}}; });
  if (!r) co_return r;
  spdlog::info("snapshot {} deleted (org {})", s->id, org_id);
  co_return ok_t{};
}

result<std::optional<store::snapshot_record>> snapshot_service::resolve(const std::string& org_id,
                                                                         const std::string& value) {
  if (value.empty()) return std::optional<store::snapshot_record>();
  auto s = resources_.get_snapshot(org_id, value);
  if (s) {
    if (s->state != "ready") return make_error(errc::conflict, "snapshot " + value + " is being deleted");
    return std::optional<store::snapshot_record>(std::move(*s));
  }
  if (s.err().code != errc::not_found) return std::move(s).err();
  // Snapshot images are used by their names only: one of another organization's cannot be
  // reached by guessing its image's name, and the answer is the same as for any unknown one.
  // A snapshot id that is not this organization's is no image reference either (it would be
  // pulled from Docker Hub as "snap-…"): unknown, like any other.
  if (names_snapshot_image(value) || is_id(value, "snap-"))
    return make_error(errc::not_found, "snapshot " + value + " not found");
  return std::optional<store::snapshot_record>();
}

}  // namespace sandfort::sandbox
