// Snapshots (snapshots.hpp): a sandbox's filesystem committed as an image of its organization's.
#include <spdlog/spdlog.h>

#include "sandfort/core/ids.hpp"
#include "sandfort/sandbox/snapshots.hpp"

#include "sandfort/docker/image_archive.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace {

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

using store::resource_store;
const resource_kind<store::snapshot_record, snapshot_view> snapshot_kind{
    .noun = "snapshot", .quota = "snapshots", .limit = &org_limits::max_snapshots, .id_prefix = "snap-",
    .view = to_snapshot_view,
    .insert = &resource_store::insert_snapshot, .get = &resource_store::get_snapshot,
    .list = &resource_store::list_snapshots, .set_state = &resource_store::set_snapshot_state,
    .count_live = &resource_store::count_live_snapshots,
    // Its users are found by image: a sandbox's row names the image it was created from.
    .holder = &resource_store::snapshot_used_by, .holder_key = &store::snapshot_record::image_ref, .held = "is used by",
    .object = "image", .object_name = &store::snapshot_record::image_ref, .remove_object = &docker::engine::remove_image};

}  // namespace

snapshot_service::snapshot_service(store::database& db, docker::engine& engine, const clock& clk,
                                   const guardrails_config& limits, operation_marks& marks)
    : named_resource_service(snapshot_kind, db, engine, clk, limits), sandboxes_(db), marks_(marks) {}

task<snapshot_view> snapshot_service::create(const std::string& org_id, const snapshot_create_request& req,
                                             const audit::actor& who) {
  if (auto named = check_name(req.name); !named) co_return std::move(named).err();
  if (req.sandbox_id.empty()) co_return make_error(errc::invalid_argument, "sandbox_id is required");
  auto sbx = sandboxes_.get_sandbox(org_id, req.sandbox_id);
  if (!sbx) co_return std::move(sbx).err();
  if ((sbx->state != "started" && sbx->state != "paused" && sbx->state != "stopped") || sbx->container_id.empty())
    co_return make_error(errc::conflict, "sandbox " + sbx->id + " is " + sbx->state +
                                             ": only a started, paused or stopped sandbox can be snapshotted");
  auto in_flight = admit(org_id, req.name, who);
  if (!in_flight) co_return std::move(in_flight).err();

  auto rec = new_row(org_id, req.name);
  const std::string repo = std::string(snapshot_repository) + "/" + random_hex(8);
  const std::string tag = "latest";
  rec.image_ref = repo + ":" + tag;
  rec.source_sandbox_id = sbx->id;

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
  // The image first, then the row (keep).
  if (!loaded) {
    error failed = std::move(loaded).err();
    co_return co_await discard(rec, std::move(failed));
  }
  auto size = co_await engine_.image_size(rec.image_ref);
  if (!size) {
    error failed = std::move(size).err();
    co_return co_await discard(rec, std::move(failed));
  }
  rec.size_bytes = *size;
  rec.created_at = rec.updated_at = format_time(clock_.now());
  const audit::record created{"snapshot.create", rec.id, "ok",
                             {{"name", rec.name}, {"sandbox", rec.source_sandbox_id}, {"size_bytes", rec.size_bytes}}};
  if (auto kept = co_await keep(rec, who, created); !kept) co_return std::move(kept).err();
  spdlog::info("snapshot {} created from sandbox {} (org {}, image {})", rec.id, rec.source_sandbox_id, org_id,
               rec.image_ref);
  co_return to_snapshot_view(rec);
}

result<std::optional<store::snapshot_record>> snapshot_service::resolve(const std::string& org_id,
                                                                         const std::string& value) {
  if (value.empty()) return std::optional<store::snapshot_record>();
  auto s = ready(org_id, value);
  if (s) return std::optional<store::snapshot_record>(std::move(*s));
  // Snapshot images are used by their names only: one of another organization's cannot be
  // reached by guessing its image's name, and the answer is the same as for any unknown one.
  // A snapshot id that is not this organization's is no image reference either (it would be
  // pulled from Docker Hub as "snap-…"): unknown, like any other.
  if (s.err().code != errc::not_found || names_snapshot_image(value) || is_id(value, "snap-")) return std::move(s).err();
  return std::optional<store::snapshot_record>();
}

}  // namespace sandfort::sandbox
