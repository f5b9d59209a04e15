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

bool valid_volume_name(const std::string& s) {
  if (s.empty() || s.size() > 63 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return s.rfind("vol-", 0) != 0;  // an id-shaped name would make addressing ambiguous
}

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

}  // namespace

volume_service::volume_service(store::database& db, docker::engine& engine, const clock& clk,
                               const guardrails_config& limits)
    : db_(db), resources_(db), guardrails_(db), engine_(engine), clock_(clk), limits_(limits), journal_(db, clk) {}

task<volume_view> volume_service::create(const std::string& org_id, const volume_create_request& req,
                                         const audit::actor& who) {
  if (!valid_volume_name(req.name))
    co_return make_error(errc::invalid_argument,
                         "name must be 1-63 characters of letters, digits, '-', '_', '.', start with a letter or "
                         "digit, and not start with 'vol-'");
  // Docker's local driver has no size limit on overlay or ext4: a limit that is not enforced
  // must not be accepted.
  if (req.size_mb)
    co_return make_error(errc::invalid_argument, "size_mb: a volume size limit is not enforced on this storage driver");
  // A taken name is refused before Docker is asked (the insert below checks again).
  if (auto taken = resources_.get_volume(org_id, req.name); taken)
    co_return make_error(errc::conflict, "volume name '" + req.name + "' is already used");
  else if (taken.err().code != errc::not_found)
    co_return std::move(taken).err();
  // The quota (docs/guardrails.md), before Docker is asked: the organization's volumes not
  // deleted and its creates still in flight. From here to the insert (or the failure), this
  // create counts as one of those in flight (see creating_).
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) co_return std::move(own).err();
  auto rows = resources_.count_live_volumes(org_id);
  if (!rows) co_return std::move(rows).err();
  auto in_flight = admit_create(journal_, org_id, who,
                                {"volumes", limits_in_force(limits_, *own).max_volumes, *rows, "delete some", {}},
                                creating_);
  if (!in_flight) co_return std::move(in_flight).err();

  store::volume_record rec;
  rec.id = new_id("vol-");
  rec.org_id = org_id;
  rec.name = req.name;
  rec.docker_name = "sandfort-vol-" + random_hex(8);
  rec.state = "ready";
  rec.created_at = rec.updated_at = format_time(clock_.now());

  // Docker's volume first, then the row: a row never names a volume that does not exist. If
  // the row cannot be written, the volume goes again, so nothing is left unaccounted for.
  // Named, not a temporary: GCC 12 mishandles temporaries inside co_await expressions.
  const docker::volume_spec wanted{rec.docker_name, {{label_instance, db_.instance_id()}, {label_volume, rec.id}}};
  auto made = co_await engine_.create_volume(wanted);
  if (!made) co_return std::move(made).err();
  auto undo = [&](error e) -> boost::asio::awaitable<result<volume_view>> {
    if (auto r = co_await engine_.remove_volume(rec.docker_name); !r)
      spdlog::warn("volume {}: could not remove Docker volume {} after a failed create: {}", rec.id, rec.docker_name,
                   r.err().message);
    co_return e;
  };
  if (!made->mountpoint.empty()) {
    if (auto r = open_volume_root(made->mountpoint); !r) {
      spdlog::warn("volume {}: {} ({})", rec.id, r.err().message, made->mountpoint);
      error failed = make_error(errc::internal, "volume " + rec.name + " could not be prepared");
      co_return co_await undo(std::move(failed));
    }
  }
  auto inserted = journal_.record_change(
      {org_id}, who, [&] { return resources_.insert_volume(rec); },
      [&] { return audit::record{"volume.create", rec.id, "ok", {{"name", rec.name}}}; });
  if (!inserted) {
    error failed = std::move(inserted).err();
    co_return co_await undo(std::move(failed));
  }
  spdlog::info("volume {} created (org {}, docker {})", rec.id, org_id, rec.docker_name);
  co_return to_volume_view(rec);
}

result<volume_page> volume_service::list(const std::string& org_id, const volume_list_request& req) {
  auto rows = resources_.list_volumes(org_id, req.cursor, req.limit + 1);  // one past the page: is there more?
  if (!rows) return std::move(rows).err();
  volume_page page;
  for (std::size_t i = 0; i < rows->size() && i < req.limit; ++i) page.items.push_back(to_volume_view((*rows)[i]));
  if (rows->size() > req.limit && !page.items.empty()) page.next_cursor = page.items.back().name;
  return page;
}

result<volume_view> volume_service::get(const std::string& org_id, const std::string& id_or_name) {
  auto v = resources_.get_volume(org_id, id_or_name);
  if (!v) return std::move(v).err();
  return to_volume_view(*v);
}

task<void> volume_service::remove(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) {
  auto v = resources_.get_volume(org_id, id_or_name);
  if (!v) co_return std::move(v).err();
  // Checked and marked in one transaction: from here no create can link it (resolve takes
  // ready volumes only), and Docker is asked only once no live sandbox mounts it.
  if (v->state == "ready") {
    auto tx = db_.begin();
    if (!tx) co_return std::move(tx).err();
    auto holder = resources_.volume_mounted_by(v->id);
    if (!holder) co_return std::move(holder).err();
    if (*holder)
      co_return make_error(errc::conflict, "volume " + v->name + " is mounted by sandbox " + **holder +
                                               " (delete that sandbox first)");
    if (auto r = resources_.set_volume_state(org_id, v->id, "deleting", {"ready"}, format_time(clock_.now())); !r)
      co_return r;
    if (auto r = tx->commit(); !r) co_return r;
  }
  auto removed = co_await engine_.remove_volume(v->docker_name);
  if (!removed && removed.err().code != errc::not_found) {
    // Still there (Docker unreachable, or a container of ours holds it): usable again.
    (void)resources_.set_volume_state(org_id, v->id, "ready", {"deleting"}, format_time(clock_.now()));
    co_return removed;
  }
  auto r = journal_.record_change(
      {org_id}, who,
      [&] { return resources_.set_volume_state(org_id, v->id, "deleted", {"deleting"}, format_time(clock_.now())); },
      [&] { return audit::record{"volume.delete", v->id, "ok", {{"name", v->name}}}; });
  if (!r) co_return r;
  spdlog::info("volume {} deleted (org {})", v->id, org_id);
  co_return ok_t{};
}

result<std::vector<store::volume_record>> volume_service::resolve(const std::string& org_id, const sandbox_spec& spec) {
  std::vector<store::volume_record> out;
  for (const auto& m : spec.volumes) {
    auto v = resources_.get_volume(org_id, m.name);
    if (!v) {
      if (v.err().code == errc::not_found) return make_error(errc::not_found, "volume " + m.name + " not found");
      return std::move(v).err();
    }
    if (v->state != "ready") return make_error(errc::conflict, "volume " + m.name + " is being deleted");
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
