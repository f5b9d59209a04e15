// Volumes (volumes.hpp): an organization's named Docker volumes, mounted into sandboxes at create.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <spdlog/spdlog.h>

#include "sandfort/core/ids.hpp"
#include "sandfort/sandbox/volumes.hpp"

#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace {

volume_view to_volume_view(const store::volume_record& v) {
  return {v.id, v.name, v.size_mb, v.state, v.created_at, v.updated_at};
}

// A fresh volume's root is root's, mode 0755: a sandbox running as another user could not write
// to it. It is opened as a directory without following a link and set to 1777 (like /tmp: anyone
// may create, only a file's owner may remove it) before any sandbox has mounted it, so nothing
// in it is a sandbox's yet.
result<void> open_volume_root(const std::string& mountpoint) {
  int fd = ::open(mountpoint.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return make_error(errc::internal, "cannot open the volume's directory: " + std::string(std::strerror(errno)));
  int rc = ::fchmod(fd, 01777);
  int saved = errno;
  ::close(fd);
  if (rc != 0) return make_error(errc::internal, "cannot set the volume's mode: " + std::string(std::strerror(saved)));
  return {};
}

using store::resource_store;
const resource_kind<store::volume_record, volume_view> volume_kind{
    .noun = "volume", .quota = "volumes", .limit = &org_limits::max_volumes, .id_prefix = "vol-",
    .view = to_volume_view,
    .insert = &resource_store::insert_volume, .get = &resource_store::get_volume, .list = &resource_store::list_volumes,
    .set_state = &resource_store::set_volume_state, .count_live = &resource_store::count_live_volumes,
    .holder = &resource_store::volume_mounted_by, .holder_key = &store::volume_record::id, .held = "is mounted by",
    .object = "Docker volume", .object_name = &store::volume_record::docker_name,
    .remove_object = &docker::engine::remove_volume};

}  // namespace

volume_service::volume_service(store::database& db, docker::engine& engine, const clock& clk,
                               const guardrails_config& limits)
    : named_resource_service(volume_kind, db, engine, clk, limits) {}

task<volume_view> volume_service::create(const std::string& org_id, const volume_create_request& req,
                                         const audit::actor& who) {
  if (auto named = check_name(req.name); !named) co_return std::move(named).err();
  // Docker's local driver has no size limit on overlay or ext4: a limit that is not enforced
  // must not be accepted.
  if (req.size_mb)
    co_return make_error(errc::invalid_argument, "size_mb: a volume size limit is not enforced on this storage driver");
  auto in_flight = admit(org_id, req.name, who);
  if (!in_flight) co_return std::move(in_flight).err();

  auto rec = new_row(org_id, req.name);
  rec.docker_name = "sandfort-vol-" + random_hex(8);
  rec.created_at = rec.updated_at = format_time(clock_.now());

  // Docker's volume first, then the row (keep). Named, not a temporary: GCC 12 mishandles temporaries inside co_await expressions.
  const docker::volume_spec wanted{rec.docker_name, {{label_instance, db_.instance_id()}, {label_volume, rec.id}}};
  auto made = co_await engine_.create_volume(wanted);
  if (!made) co_return std::move(made).err();
  if (!made->mountpoint.empty()) {
    if (auto r = open_volume_root(made->mountpoint); !r) {
      spdlog::warn("volume {}: {} ({})", rec.id, r.err().message, made->mountpoint);
      error failed = make_error(errc::internal, "volume " + rec.name + " could not be prepared");
      co_return co_await discard(rec, std::move(failed));
    }
  }
  const audit::record created{"volume.create", rec.id, "ok", {{"name", rec.name}}};
  if (auto kept = co_await keep(rec, who, created); !kept) co_return std::move(kept).err();
  spdlog::info("volume {} created (org {}, docker {})", rec.id, org_id, rec.docker_name);
  co_return to_volume_view(rec);
}

result<std::vector<store::volume_record>> volume_service::resolve(const std::string& org_id, const sandbox_spec& spec) {
  std::vector<store::volume_record> out;
  for (const auto& m : spec.volumes) {
    auto v = ready(org_id, m.name);
    if (!v) return std::move(v).err();
    out.push_back(std::move(*v));
  }
  return out;
}

result<std::vector<docker::volume_mount>> volume_service::mounts_of(const std::string& sandbox_id) {
  auto rows = resources_.list_sandbox_volumes(sandbox_id);
  if (!rows) return std::move(rows).err();
  std::vector<docker::volume_mount> out;
  for (const auto& r : *rows) out.push_back({r.docker_name, r.mount_path, r.read_only, true});
  return out;
}

}  // namespace sandfort::sandbox
