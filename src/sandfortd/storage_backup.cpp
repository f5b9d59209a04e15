// A backup is a directory: sandfort.db (the consistent copy), manifest.json (what the copy's rows
// name and where each one is), volumes/<docker volume>.tar (each volume's files, as Docker's
// archive API reads them through a container that is created and never started) and
// snapshots.tar (`docker save` of the snapshot images by id, so loading it moves no tag).
// Neither side touches a volume's files from the host: a volume is written by hostile root, and
// Docker resolves paths inside the helper container's own view.
#include "storage_backup.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <spdlog/fmt/fmt.h>
#include <vector>

#include "engine_files.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/image_archive.hpp"
#include "sandfort/docker/messages.hpp"
#include "sandfort/sandbox/service.hpp"
#include "sandfort/sandbox/snapshots.hpp"
#include "sandfort/sandbox/volumes.hpp"
#include "sandfort/store/backup.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/resource_store.hpp"
#include "sandfort/version.hpp"

namespace sandfort::daemon {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* manifest_file = "manifest.json";
constexpr const char* database_file = "sandfort.db";
constexpr const char* snapshot_archive = "snapshots.tar";
// Labels the helper image and containers: not io.sandfort.instance, so a running daemon's
// reconciliation never takes them for sandboxes of its own.
constexpr const char* label_helper = "io.sandfort.backup";
constexpr const char* mount_point = "/v";

// A row whose Docker object is not where the row says, with why.
struct missing {
  std::string kind;  // volume | snapshot
  std::string id, org_id, name, reason;
};

std::string describe(const missing& m) {
  return fmt::format("{} {} ('{}', org {}): {}", m.kind, m.id, m.name, m.org_id, m.reason);
}

json to_json(const missing& m) {
  return {{"kind", m.kind}, {"id", m.id}, {"org_id", m.org_id}, {"name", m.name}, {"reason", m.reason}};
}

// A volume's archive in the backup: "volumes/<docker volume>.tar". Docker's volume names are
// letters, digits, '_', '.', '-' and start with a letter or digit, so this stays in volumes/;
// anything else (a hand-edited database) gets a name that matches no file.
std::string archive_of(const std::string& docker_volume) {
  bool plain = !docker_volume.empty() && std::isalnum(static_cast<unsigned char>(docker_volume[0]));
  for (char c : docker_volume)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  return plain ? "volumes/" + docker_volume + ".tar" : "volumes/not-a-volume-name";
}

// What the engine holds under a name, if it is this instance's object for that row.
enum class held { absent, ours, foreign };

held classify(const std::map<std::string, std::string>& labels, const std::string& instance, const char* id_label,
              const std::string& id) {
  auto has = [&](const char* k, const std::string& v) {
    auto it = labels.find(k);
    return it != labels.end() && it->second == v;
  };
  return has(sandbox::label_instance, instance) && has(id_label, id) ? held::ours : held::foreign;
}

result<std::pair<held, std::string>> inspect_image(engine_files& engine, const std::string& ref, const std::string& instance,
                                                   const std::string& snapshot_id) {
  auto a = engine.call("GET", "/images/" + ref + "/json");
  if (!a) return std::move(a).err();
  if (a->status == 404) return std::pair{held::absent, std::string()};
  if (a->status != 200) return make_error(errc::unavailable, "image " + ref + ": " + a->message());
  auto details = docker::parse_image_details(a->json());
  if (!details) return std::move(details).err();
  return std::pair{classify(details->labels, instance, sandbox::label_snapshot, snapshot_id), details->id};
}

result<held> inspect_volume(engine_files& engine, const std::string& name, const std::string& instance,
                            const std::string& volume_id) {
  auto a = engine.call("GET", "/volumes/" + name);
  if (!a) return std::move(a).err();
  if (a->status == 404) return held::absent;
  if (a->status != 200) return make_error(errc::unavailable, "volume " + name + ": " + a->message());
  return classify(docker::parse_volume(a->json()).labels, instance, sandbox::label_volume, volume_id);
}

// POST /images/load answers 200 and reports a failure inside its body.
result<void> check_load(const result<engine_answer>& a, const std::string& what) {
  if (!a) return a.err();
  if (a->status != 200 || a->body.find("\"error") != std::string::npos)
    return make_error(errc::unavailable, "loading " + what + ": " + a->message());
  return ok_t{};
}

// The helper containers' image: a config and no layer (so no file of its own, nothing to pull,
// and present on a clean engine too). A container made from it is never started.
class helper_image {
 public:
  helper_image(engine_files& engine, const std::string& instance) : engine_(engine), instance_(instance) {}
  ~helper_image() {
    if (!tag_.empty()) (void)engine_.call("DELETE", "/images/" + tag_ + "?noprune=0");
  }
  helper_image(const helper_image&) = delete;
  helper_image& operator=(const helper_image&) = delete;

  result<std::string> tag() {
    if (!tag_.empty()) return tag_;
#if defined(__aarch64__)
    const char* arch = "arm64";
#else
    const char* arch = "amd64";
#endif
    json config = {{"architecture", arch},
                   {"os", "linux"},
                   {"config", {{"Labels", {{label_helper, instance_}}}}},
                   {"rootfs", {{"type", "layers"}, {"diff_ids", json::array()}}},
                   {"history", json::array()}};
    std::string tag = "sandfort-backup-helper:" + random_hex(8);
    auto loaded = engine_.call("POST", "/images/load?quiet=1", docker::layerless_image_archive(config.dump(), tag, 0),
                               "application/x-tar");
    if (auto r = check_load(loaded, "the helper image"); !r) return std::move(r).err();
    tag_ = tag;
    return tag_;
  }

 private:
  engine_files& engine_;
  std::string instance_;
  std::string tag_;
};

// A container (created, never started) that mounts one volume at /v: Docker's archive API reads
// and writes the volume through it. Removed when it goes out of scope.
class volume_window {
 public:
  static result<std::unique_ptr<volume_window>> open(engine_files& engine, helper_image& image, const std::string& volume,
                                                     const std::string& instance) {
    auto tag = image.tag();
    if (!tag) return std::move(tag).err();
    docker::container_spec spec;
    spec.image = *tag;
    spec.cmd = {"true"};
    spec.init = false;
    spec.labels = {{label_helper, instance}};
    spec.volumes = {{volume, mount_point, false, true}};
    auto made = engine.call("POST", "/containers/create", docker::to_create_body(spec).dump());
    if (!made) return std::move(made).err();
    if (made->status != 201) return make_error(errc::unavailable, "helper container for " + volume + ": " + made->message());
    auto id = made->json().value("Id", std::string());
    if (id.empty()) return make_error(errc::internal, "helper container for " + volume + ": no Id in " + made->body);
    return std::unique_ptr<volume_window>(new volume_window(engine, id));
  }
  ~volume_window() { (void)engine_.call("DELETE", "/containers/" + id_ + "?force=1"); }
  volume_window(const volume_window&) = delete;
  volume_window& operator=(const volume_window&) = delete;

  result<std::uint64_t> read_into(const std::string& file) {
    return engine_.download("/containers/" + id_ + "/archive?path=" + query_escape(mount_point), file);
  }
  result<void> write_from(const std::string& file) {
    auto a = engine_.upload("PUT", "/containers/" + id_ + "/archive?path=/", file);
    if (!a) return std::move(a).err();
    if (a->status != 200) return make_error(errc::unavailable, "writing the volume: " + a->message());
    return ok_t{};
  }

 private:
  volume_window(engine_files& engine, std::string id) : engine_(engine), id_(std::move(id)) {}
  engine_files& engine_;
  std::string id_;
};

// --- backup ---------------------------------------------------------------------------------------

struct storage_copy {
  json volumes = json::array();
  json snapshots = json::array();
  std::vector<missing> lost;
  std::uint64_t bytes = 0;
};

result<void> copy_snapshots(engine_files& engine, const store::backup_report& db, const fs::path& dir, storage_copy& c) {
  std::string names;
  for (const auto& row : db.snapshots) {
    auto image = inspect_image(engine, row.docker_ref, db.instance_id, row.id);
    if (!image) return std::move(image).err();
    if (image->first != held::ours) {
      c.lost.push_back({"snapshot", row.id, row.org_id, row.name,
                        image->first == held::absent ? "no image " + row.docker_ref + " in the engine"
                                                     : "image " + row.docker_ref + " is not this instance's (left out)"});
      continue;
    }
    c.snapshots.push_back({{"id", row.id}, {"org_id", row.org_id}, {"name", row.name}, {"image_ref", row.docker_ref},
                           {"image_id", image->second}});
    names += (names.empty() ? "?names=" : "&names=") + query_escape(image->second);
  }
  if (names.empty()) return ok_t{};
  // One archive: layers the images share (their base image's) are in it once.
  auto size = engine.download("/images/get" + names, (dir / snapshot_archive).string());
  if (!size) return std::move(size).err();
  c.bytes += *size;
  return ok_t{};
}

result<void> copy_volumes(engine_files& engine, const store::backup_report& db, const fs::path& dir, storage_copy& c) {
  if (db.volumes.empty()) return ok_t{};
  fs::create_directory(dir / "volumes");
  helper_image image(engine, db.instance_id);
  for (const auto& row : db.volumes) {
    auto volume = inspect_volume(engine, row.docker_ref, db.instance_id, row.id);
    if (!volume) return std::move(volume).err();
    if (*volume != held::ours) {
      c.lost.push_back({"volume", row.id, row.org_id, row.name,
                        *volume == held::absent ? "no Docker volume " + row.docker_ref + " in the engine"
                                                : "Docker volume " + row.docker_ref + " is not this instance's (left out)"});
      continue;
    }
    auto window = volume_window::open(engine, image, row.docker_ref, db.instance_id);
    if (!window) return std::move(window).err();
    const std::string archive = archive_of(row.docker_ref);
    auto size = (*window)->read_into((dir / archive).string());
    if (!size) return std::move(size).err();
    c.bytes += *size;
    c.volumes.push_back({{"id", row.id}, {"org_id", row.org_id}, {"name", row.name}, {"docker_name", row.docker_ref},
                         {"archive", archive}, {"bytes", *size}});
  }
  return ok_t{};
}

result<void> write_file(const fs::path& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(errc::unavailable, "cannot create " + path.string() + ": " + std::strerror(errno));
  bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return make_error(errc::unavailable, "cannot write " + path.string());
  return ok_t{};
}

int database_only(const config& cfg, const backup_options& o, std::ostream& out, std::ostream& err) {
  auto r = store::backup_database(cfg.database, o.to, o.force);
  if (!r) {
    err << "sandfortd backup: " << r.err().message << "\n";
    return r.err().code == errc::conflict || r.err().code == errc::not_found ? 2 : 1;
  }
  out << fmt::format(
      "backed up {} to {} ({} bytes): {} organizations, {} API keys, {} sandbox rows, {} audit events\n"
      "volumes and snapshot images are not in it (--database-only)\n"
      "back up the audit signing key ({}) and the secrets key ({}) on their own: docs/operations.md\n",
      cfg.database, o.to, r->bytes, r->organizations, r->api_keys, r->sandboxes, r->audit_events, cfg.audit.key_path,
      cfg.secrets.key_file);
  return 0;
}

// Everything into `temp`; returns the exit code and what is missing.
int fill_backup(const config& cfg, const fs::path& temp, std::ostream& out, std::ostream& err) {
  auto db = store::backup_database(cfg.database, (temp / database_file).string(), false);
  if (!db) {
    err << "sandfortd backup: " << db.err().message << "\n";
    return db.err().code == errc::not_found ? 2 : 1;
  }
  auto engine = engine_files::connect(cfg.docker_socket);
  if (!engine) {
    err << "sandfortd backup: " << engine.err().message << "\n";
    return 1;
  }
  storage_copy c;
  for (auto step : {&copy_snapshots, &copy_volumes})
    if (auto r = step(*engine, *db, temp, c); !r) {
      err << "sandfortd backup: " << r.err().message << "\n";
      return 1;
    }
  json manifest = {{"format", 1},
                   {"sandfortd", sandfort::version},
                   {"taken_at", format_time(std::chrono::system_clock::now())},
                   {"instance_id", db->instance_id},
                   {"database", database_file},
                   {"volumes", c.volumes},
                   {"snapshots", c.snapshots},
                   {"snapshot_archive", c.snapshots.empty() ? json(nullptr) : json(snapshot_archive)},
                   {"missing", json::array()}};
  for (const auto& m : c.lost) manifest["missing"].push_back(to_json(m));
  if (auto r = write_file(temp / manifest_file, manifest.dump(2) + "\n"); !r) {
    err << "sandfortd backup: " << r.err().message << "\n";
    return 1;
  }
  out << fmt::format(
      "backed up {}: {} organizations, {} API keys, {} sandbox rows, {} audit events; {} of {} volumes and {} of {} "
      "snapshot images ({} bytes of archives)\n",
      cfg.database, db->organizations, db->api_keys, db->sandboxes, db->audit_events, c.volumes.size(), db->volumes.size(),
      c.snapshots.size(), db->snapshots.size(), db->bytes + c.bytes);
  for (const auto& m : c.lost) err << "sandfortd backup: not in the backup: " << describe(m) << "\n";
  return c.lost.empty() ? 0 : 3;
}

// --- restore --------------------------------------------------------------------------------------

result<json> read_manifest(const fs::path& from) {
  std::ifstream in(from / manifest_file);
  if (!in) return make_error(errc::not_found, (from / manifest_file).string() + " is missing: not a sandfortd backup directory");
  auto m = json::parse(in, nullptr, false);
  if (!m.is_object() || m.value("format", 0) != 1 || !m.contains("instance_id"))
    return make_error(errc::invalid_argument, (from / manifest_file).string() + " is not a sandfortd backup manifest");
  return m;
}

// The copy goes beside the database and is renamed over it: never a half-written database.
result<void> install_database(const fs::path& copy, const std::string& database) {
  const std::string temp = database + ".restore-" + random_hex(4);
  std::error_code ec;
  fs::copy_file(copy, temp, ec);
  if (ec) return make_error(errc::unavailable, "cannot copy " + copy.string() + " to " + temp + ": " + ec.message());
  fs::permissions(temp, fs::perms::owner_read | fs::perms::owner_write, ec);
  if (int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  // A -wal or -shm left beside the old database would be replayed onto the restored one.
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(database + suffix, ec);
  fs::rename(temp, database, ec);
  if (ec) {
    fs::remove(temp, ec);
    return make_error(errc::unavailable, "cannot move the copy to " + database + ": " + ec.message());
  }
  return ok_t{};
}

// The manifest's entry for a row, or null.
json entry_for(const json& list, const std::string& id) {
  for (const auto& e : list)
    if (e.value("id", std::string()) == id) return e;
  return nullptr;
}

struct restore_counts {
  int loaded = 0, present = 0;
};

result<void> restore_snapshots(engine_files& engine, const fs::path& from, const json& manifest, const std::string& instance,
                               const std::vector<store::snapshot_record>& rows, std::vector<missing>& lost,
                               restore_counts& n) {
  std::vector<const store::snapshot_record*> wanted;
  for (const auto& row : rows) {
    auto image = inspect_image(engine, row.image_ref, instance, row.id);
    if (!image) return std::move(image).err();
    if (image->first == held::ours) ++n.present;
    else if (image->first == held::foreign)
      lost.push_back({"snapshot", row.id, row.org_id, row.name,
                      "the engine's image " + row.image_ref + " is not this instance's: left alone, not replaced"});
    else wanted.push_back(&row);
  }
  if (wanted.empty()) return ok_t{};
  const auto archive = manifest.value("snapshot_archive", json(nullptr));
  if (archive.is_string()) {
    auto loaded = engine.upload("POST", "/images/load?quiet=1", (from / archive.get<std::string>()).string());
    if (auto r = check_load(loaded, (from / archive.get<std::string>()).string()); !r) return r;
  }
  for (const auto* row : wanted) {
    const json entry = entry_for(manifest["snapshots"], row->id);
    const std::string image_id = entry.is_object() ? entry.value("image_id", std::string()) : std::string();
    std::optional<held> image;
    if (!image_id.empty()) {
      auto got = inspect_image(engine, image_id, instance, row->id);
      if (!got) return std::move(got).err();
      image = got->first;
    }
    if (image != held::ours) {
      lost.push_back({"snapshot", row->id, row->org_id, row->name,
                      "image " + row->image_ref + " is neither in the engine nor in the backup"});
      continue;
    }
    const auto colon = row->image_ref.rfind(':');
    auto tagged = engine.call("POST", "/images/" + image_id + "/tag?repo=" + query_escape(row->image_ref.substr(0, colon)) +
                                          "&tag=" + query_escape(row->image_ref.substr(colon + 1)));
    if (!tagged) return std::move(tagged).err();
    if (tagged->status != 201) return make_error(errc::unavailable, "tagging " + row->image_ref + ": " + tagged->message());
    ++n.loaded;
  }
  return ok_t{};
}

result<void> restore_volumes(engine_files& engine, const fs::path& from, const json& manifest, const std::string& instance,
                             const std::vector<store::volume_record>& rows, std::vector<missing>& lost, restore_counts& n) {
  helper_image image(engine, instance);
  for (const auto& row : rows) {
    auto volume = inspect_volume(engine, row.docker_name, instance, row.id);
    if (!volume) return std::move(volume).err();
    if (*volume == held::ours) {
      ++n.present;  // kept as it is: newer than the backup, if anything
      continue;
    }
    if (*volume == held::foreign) {
      lost.push_back({"volume", row.id, row.org_id, row.name,
                      "the engine's volume " + row.docker_name + " is not this instance's: left alone, not replaced"});
      continue;
    }
    // The archive's name is the Docker volume's, never a path the manifest could point elsewhere.
    const json entry = entry_for(manifest["volumes"], row.id);
    if (!entry.is_object() || entry.value("archive", std::string()) != archive_of(row.docker_name) ||
        !fs::is_regular_file(from / archive_of(row.docker_name))) {
      lost.push_back({"volume", row.id, row.org_id, row.name,
                      "Docker volume " + row.docker_name + " is neither in the engine nor in the backup"});
      continue;
    }
    const json spec = {{"Name", row.docker_name},
                       {"Driver", "local"},
                       {"Labels", {{sandbox::label_instance, instance}, {sandbox::label_volume, row.id}}}};
    auto made = engine.call("POST", "/volumes/create", spec.dump());
    if (!made) return std::move(made).err();
    if (made->status != 201) return make_error(errc::unavailable, "creating volume " + row.docker_name + ": " + made->message());
    auto filled = [&]() -> result<void> {
      auto window = volume_window::open(engine, image, row.docker_name, instance);
      if (!window) return std::move(window).err();
      return (*window)->write_from((from / archive_of(row.docker_name)).string());
    }();
    if (!filled) {
      // An empty volume under the row's name would pass for the restored one.
      (void)engine.call("DELETE", "/volumes/" + row.docker_name);
      return make_error(filled.err().code, "volume " + row.id + ": " + filled.err().message);
    }
    ++n.loaded;
  }
  return ok_t{};
}

}  // namespace

int run_backup(const config& cfg, const backup_options& o, std::ostream& out, std::ostream& err) {
  if (o.database_only) return database_only(cfg, o, out, err);
  std::error_code ec;
  const fs::path target = fs::absolute(o.to, ec);
  if (ec || target.filename().empty()) {
    err << "sandfortd backup: bad path " << o.to << "\n";
    return 1;
  }
  if (fs::exists(target, ec) && !o.force) {
    err << "sandfortd backup: " << o.to << " exists (give --force to replace it)\n";
    return 2;
  }
  // Written beside the target and renamed into place once complete: a backup directory is never half.
  const fs::path temp = target.string() + ".tmp-" + random_hex(4);
  if (::mkdir(temp.c_str(), 0700) != 0) {
    err << "sandfortd backup: cannot create " << temp.string() << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  int code = fill_backup(cfg, temp, out, err);
  if (code != 0 && code != 3) {
    fs::remove_all(temp, ec);
    return code;
  }
  const fs::path old = target.string() + ".old-" + random_hex(4);
  if (fs::exists(target, ec)) fs::rename(target, old, ec);
  if (!ec) fs::rename(temp, target, ec);
  if (ec) {
    err << "sandfortd backup: cannot move the backup to " << target.string() << ": " << ec.message() << "\n";
    fs::remove_all(temp, ec);
    return 1;
  }
  fs::remove_all(old, ec);
  out << "written to " << target.string() << "; back up the audit signing key (" << cfg.audit.key_path
      << ") and the secrets key (" << cfg.secrets.key_file << ") on their own: docs/operations.md\n";
  return code;
}

int run_restore(const config& cfg, const restore_options& o, std::ostream& out, std::ostream& err) {
  const fs::path from = o.from;
  auto manifest = read_manifest(from);
  if (!manifest) {
    err << "sandfortd restore: " << manifest.err().message << "\n";
    return 2;
  }
  std::error_code ec;
  if (fs::exists(cfg.database, ec) && !o.force) {
    err << "sandfortd restore: " << cfg.database << " exists (stop sandfortd; --force replaces it)\n";
    return 2;
  }
  if (auto r = install_database(from / database_file, cfg.database); !r) {
    err << "sandfortd restore: " << r.err().message << "\n";
    return 1;
  }
  // Opened as the daemon opens it (migrations run forward): the rows as the daemon will see them.
  auto db = store::database::open(cfg.database);
  if (!db) {
    err << "sandfortd restore: " << db.err().message << "\n";
    return 1;
  }
  const std::string instance = (*db)->instance_id();
  if (instance != (*manifest)["instance_id"].get<std::string>()) {
    err << "sandfortd restore: the database is instance " << instance << ", the manifest says "
        << (*manifest)["instance_id"] << ": not one backup\n";
    return 1;
  }
  auto volumes = store::resource_store(*(*db)).list_live_volumes_all_orgs();
  auto snapshots = store::resource_store(*(*db)).list_live_snapshots_all_orgs();
  db->reset();
  if (!volumes || !snapshots) {
    err << "sandfortd restore: " << (!volumes ? volumes.err().message : snapshots.err().message) << "\n";
    return 1;
  }
  auto engine = engine_files::connect(cfg.docker_socket);
  if (!engine) {
    err << "sandfortd restore: " << engine.err().message << "\n";
    return 1;
  }
  std::vector<missing> lost;
  restore_counts images, vols;
  if (auto r = restore_snapshots(*engine, from, *manifest, instance, *snapshots, lost, images); !r) {
    err << "sandfortd restore: " << r.err().message << "\n";
    return 1;
  }
  if (auto r = restore_volumes(*engine, from, *manifest, instance, *volumes, lost, vols); !r) {
    err << "sandfortd restore: " << r.err().message << "\n";
    return 1;
  }
  out << fmt::format(
      "restored {} to {}: {} snapshot images loaded, {} already there; {} volumes restored, {} already there (kept as "
      "they are)\n",
      from.string(), cfg.database, images.loaded, images.present, vols.loaded, vols.present);
  for (const auto& m : (*manifest)["missing"])
    err << "sandfortd restore: the backup was taken without " << m.value("kind", "") << " " << m.value("id", "") << ": "
        << m.value("reason", "") << "\n";
  for (const auto& m : lost) err << "sandfortd restore: missing: " << describe(m) << "\n";
  if (!lost.empty())
    err << "sandfortd restore: " << lost.size()
        << " rows point at a volume or image that is not there; sandboxes cannot use them (docs/operations.md)\n";
  return lost.empty() ? 0 : 3;
}

}  // namespace sandfort::daemon
