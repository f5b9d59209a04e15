#include <catch2/catch.hpp>

#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"
#include "spec_validation.hpp"

using namespace sandfort;
using namespace sandfort::docker;
using json = nlohmann::json;

namespace {

container_spec sandbox_spec() {
  container_spec s;
  s.name = "sb-1";
  s.image = "sandfort/base:bookworm";
  s.entrypoint = {"/.sandfort/agent"};
  s.cmd = {"--serve"};
  s.env = {"HTTP_PROXY=http://x:y@10.0.0.1:3128"};
  s.labels = {{"io.sandfort.sandbox", "sb-1"}, {"io.sandfort.org", "o-1"}};
  s.hostname = "sandbox";
  s.binds = {{"/var/lib/sandfort/agent", "/.sandfort/agent", true}};
  s.tmpfs = {{"/run/sandfort", 1 << 20, 256, 01777}};
  s.cpus = 1.5;
  s.memory_bytes = 512ll << 20;
  s.pids_limit = 256;
  s.cap_add = {"CHOWN", "SETUID"};
  s.network_mode = "sandfort-net";
  s.stop_timeout_s = 3;
  return s;
}

}  // namespace

TEST_CASE("the create body carries the isolation defaults") {
  auto body = to_create_body(sandbox_spec());
  const auto& hc = body.at("HostConfig");
  CHECK(hc.at("Memory") == 512ll << 20);
  CHECK(hc.at("MemorySwap") == hc.at("Memory"));  // no swap
  CHECK(hc.at("NanoCpus") == 1'500'000'000ll);
  CHECK(hc.at("NanoCpus").is_number_integer());
  CHECK(hc.at("PidsLimit") == 256);
  CHECK(hc.at("CapDrop") == json::array({"ALL"}));
  CHECK(hc.at("CapAdd") == json::array({"CHOWN", "SETUID"}));
  CHECK(hc.at("SecurityOpt") == json::array({"no-new-privileges"}));
  CHECK(hc.at("Init") == true);
  CHECK(hc.at("Privileged") == false);
  CHECK(hc.at("ReadonlyRootfs") == false);
  CHECK(hc.at("NetworkMode") == "sandfort-net");
  CHECK(hc.at("Binds") == json::array({"/var/lib/sandfort/agent:/.sandfort/agent:ro"}));
  // Whatever the sandbox writes there runs nowhere and escalates nothing, and stays small.
  CHECK(hc.at("Tmpfs") == json{{"/run/sandfort", "rw,nosuid,nodev,noexec,size=1048576,nr_inodes=256,mode=1777"}});
  CHECK(hc.at("LogConfig") == json::parse(R"({"Type":"json-file","Config":{"max-size":"10m","max-file":"1"}})"));
  CHECK_FALSE(hc.contains("Runtime"));
  // Nothing that widens the sandbox is ever set.
  for (const char* key : {"PidMode", "IpcMode", "UTSMode", "UsernsMode", "Devices", "CgroupParent", "Mounts"})
    CHECK_FALSE(hc.contains(key));
}

TEST_CASE("the create body carries the container's configuration") {
  auto body = to_create_body(sandbox_spec());
  CHECK(body.at("Image") == "sandfort/base:bookworm");
  CHECK(body.at("Entrypoint") == json::array({"/.sandfort/agent"}));
  CHECK(body.at("Cmd") == json::array({"--serve"}));
  CHECK(body.at("Env") == json::array({"HTTP_PROXY=http://x:y@10.0.0.1:3128"}));
  CHECK(body.at("Labels") == json::parse(R"({"io.sandfort.sandbox":"sb-1","io.sandfort.org":"o-1"})"));
  CHECK(body.at("Hostname") == "sandbox");
  CHECK(body.at("StopTimeout") == 3);
  for (const char* key : {"AttachStdin", "AttachStdout", "AttachStderr", "Tty", "OpenStdin"}) CHECK(body.at(key) == false);
  CHECK_FALSE(body.contains("name"));  // the name goes in the query string
}

TEST_CASE("empty fields are left out so the image's own settings apply") {
  container_spec s;
  s.image = "debian";
  auto body = to_create_body(s);
  for (const char* key : {"Entrypoint", "Cmd", "Env", "Labels", "Hostname", "User", "WorkingDir"}) {
    INFO(key);
    CHECK_FALSE(body.contains(key));
  }
  CHECK_FALSE(body.at("HostConfig").contains("Runtime"));
  CHECK_FALSE(body.at("HostConfig").contains("DnsOptions"));  // the engine's own resolv.conf
  CHECK(body.at("HostConfig").at("NetworkMode") == "none");
  CHECK(body.at("HostConfig").at("NanoCpus") == 1'000'000'000ll);

  s.user = "1000:1000";
  s.workdir = "/work";
  s.runtime = "runsc";
  s.dns_options = {"timeout:1", "attempts:1"};
  body = to_create_body(s);
  CHECK(body.at("HostConfig").at("DnsOptions") == json::array({"timeout:1", "attempts:1"}));
  CHECK(body.at("User") == "1000:1000");
  CHECK(body.at("WorkingDir") == "/work");
  CHECK(body.at("HostConfig").at("Runtime") == "runsc");
}

TEST_CASE("fractional CPU limits round to whole nanoCPUs") {
  container_spec s;
  s.image = "debian";
  s.cpus = 0.1;
  CHECK(to_create_body(s)["HostConfig"]["NanoCpus"] == 100'000'000ll);
  s.cpus = 0.333333333333;
  CHECK(to_create_body(s)["HostConfig"]["NanoCpus"] == 333'333'333ll);
  s.cpus = 0;
  CHECK(to_create_body(s)["HostConfig"]["NanoCpus"] == 0);
}

TEST_CASE("specs the engine would misread are refused") {
  auto s = sandbox_spec();
  CHECK(detail::validate_spec(s).ok());

  auto bad = s;
  bad.image.clear();
  CHECK(detail::validate_spec(bad).err().code == errc::invalid_argument);

  bad = s;
  bad.binds = {{"/tmp/a:/etc", "/x", false}};  // would mount /tmp/a on /etc
  CHECK(detail::validate_spec(bad).err().code == errc::invalid_argument);

  bad = s;
  bad.binds = {{"relative", "/x", false}};
  CHECK_FALSE(detail::validate_spec(bad).ok());

  bad = s;
  bad.binds = {{"/a", "/x,ro", false}};
  CHECK_FALSE(detail::validate_spec(bad).ok());

  bad = s;
  bad.name = "../../x";
  CHECK_FALSE(detail::validate_spec(bad).ok());

  bad = s;
  bad.tmpfs = {{"/run/x,exec", 1 << 20, 256, 01777}};
  CHECK_FALSE(detail::validate_spec(bad).ok());

  bad = s;
  bad.tmpfs = {{"/run/x", 0, 256, 01777}};
  CHECK_FALSE(detail::validate_spec(bad).ok());

  bad = s;
  bad.memory_bytes = -1;
  CHECK_FALSE(detail::validate_spec(bad).ok());
}

TEST_CASE("named volumes become HostConfig.Mounts, read-only and without copying the image's files") {
  auto s = sandbox_spec();
  CHECK_FALSE(to_create_body(s).at("HostConfig").contains("Mounts"));
  s.volumes = {{"sandfort-vol-0123456789abcdef", "/data", true, true}};
  auto mounts = to_create_body(s).at("HostConfig").at("Mounts");
  REQUIRE(mounts.size() == 1);
  CHECK(mounts[0] == json{{"Type", "volume"},
                          {"Source", "sandfort-vol-0123456789abcdef"},
                          {"Target", "/data"},
                          {"ReadOnly", true},
                          {"VolumeOptions", {{"NoCopy", true}}}});
  CHECK(detail::validate_spec(s).ok());

  for (const volume_mount& bad : {volume_mount{"", "/data"}, volume_mount{"../x", "/data"}, volume_mount{"v", "data"},
                                  volume_mount{"v", "/"}, volume_mount{"v", "/a,b"}}) {
    auto b = s;
    b.volumes = {bad};
    CHECK_FALSE(detail::validate_spec(b).ok());
  }
}

TEST_CASE("a volume as the engine describes it") {
  auto v = parse_volume(json::parse(R"({"Name":"sandfort-vol-1","Driver":"local",
      "Mountpoint":"/var/lib/docker/volumes/sandfort-vol-1/_data","Labels":{"io.sandfort.volume":"vol-1"},
      "Scope":"local"})"));
  CHECK(v.name == "sandfort-vol-1");
  CHECK(v.driver == "local");
  CHECK(v.mountpoint == "/var/lib/docker/volumes/sandfort-vol-1/_data");
  CHECK(v.labels == std::map<std::string, std::string>{{"io.sandfort.volume", "vol-1"}});
  CHECK(parse_volume(json::parse(R"({"Name":"x","Labels":null})")).labels.empty());
}

TEST_CASE("a volume's CreatedAt is read as RFC 3339 in any offset, anything else is unknown (0)") {
  auto created = [](const char* text) {
    return parse_volume(json{{"Name", "x"}, {"CreatedAt", text}}).created_unix;
  };
  CHECK(created("1970-01-01T00:00:00Z") == 0);
  CHECK(created("2026-01-02T03:00:00Z") == 1'767'322'800);
  CHECK(created("2026-01-02T03:00:00.123456789Z") == 1'767'322'800);
  CHECK(created("2026-01-02T05:00:00+02:00") == 1'767'322'800);
  CHECK(created("2026-01-01T22:30:00-04:30") == 1'767'322'800);
  CHECK(created("2024-02-29T00:00:00Z") == 1'709'164'800);  // a leap day
  CHECK(created("") == 0);
  CHECK(created("2026-01-02") == 0);
  CHECK(created("2026-02-30T00:00:00Z") == 0);
  CHECK(created("2026-01-02T03:00:00") == 0);  // no offset: ambiguous
  CHECK(created("2026-01-02T03:00:00Zjunk") == 0);
  CHECK(parse_volume(json{{"Name", "x"}, {"CreatedAt", 12}}).created_unix == 0);
}

TEST_CASE("volume and image lists as the engine answers them") {
  auto volumes = parse_volume_list(json::parse(R"({"Volumes":[{"Name":"a"},{"Name":"b","Labels":{"k":"v"}}]})"));
  REQUIRE(volumes);
  REQUIRE(volumes->size() == 2);
  CHECK((*volumes)[1].labels.at("k") == "v");
  CHECK(parse_volume_list(json::parse(R"({"Volumes":null})"))->empty());
  CHECK_FALSE(parse_volume_list(json::parse("[]")));

  auto images = parse_image_list(json::parse(
      R"([{"Id":"sha256:1","RepoTags":["r:1","<none>:<none>","r:2"],"Created":5,"Labels":{"k":"v","n":1}}])"));
  REQUIRE(images);
  REQUIRE(images->size() == 1);
  CHECK((*images)[0].repo_tags == std::vector<std::string>{"r:1", "r:2"});
  CHECK((*images)[0].labels == std::map<std::string, std::string>{{"k", "v"}});  // not text: left out
  CHECK((*images)[0].created_unix == 5);
  CHECK(parse_image_list(json::array())->empty());
  CHECK_FALSE(parse_image_list(json::object()));
}

TEST_CASE("StorageOpt size only when a size is asked (hard disk enforcement)") {
  auto spec = sandbox_spec();
  CHECK_FALSE(to_create_body(spec)["HostConfig"].contains("StorageOpt"));
  spec.storage_size_mb = 64;
  CHECK(to_create_body(spec)["HostConfig"]["StorageOpt"] == json{{"size", "64M"}});
}

TEST_CASE("the engine's storage as GET /info says it, and whether it enforces a container's size") {
  // Recorded on this machine (Docker 20.10, ext4) and on an XFS host.
  auto ext4 = parse_storage_info(json::parse(
      R"({"Driver":"overlay2","DockerRootDir":"/var/lib/docker","DriverStatus":[["Backing Filesystem","extfs"],)"
      R"(["Supports d_type","true"],["Native Overlay Diff","true"],["userxattr","false"]]})"));
  CHECK(ext4.driver == "overlay2");
  CHECK(ext4.backing_filesystem == "extfs");
  CHECK(ext4.root_dir == "/var/lib/docker");
  CHECK_FALSE(supports_storage_quota(ext4, "/dev/vda / ext4 rw,relatime 0 0\n"));
  auto xfs = parse_storage_info(json::parse(
      R"({"Driver":"overlay2","DockerRootDir":"/data/docker root","DriverStatus":[["Backing Filesystem","xfs"]]})"));
  CHECK(xfs.backing_filesystem == "xfs");
  // The mount holding the root, its path escaped as /proc/self/mounts writes it.
  CHECK(supports_storage_quota(xfs, "/dev/vda / ext4 rw 0 0\n/dev/vdb /data xfs rw,pquota 0 0\n"));
  CHECK(supports_storage_quota(xfs, "/dev/vdb /data/docker\\040root xfs rw,prjquota 0 0\n"));
  CHECK_FALSE(supports_storage_quota(xfs, "/dev/vdb /data xfs rw,pqnoenforce 0 0\n"));
  CHECK_FALSE(supports_storage_quota(xfs, "/dev/vdb /data xfs rw,prjquota 0 0\n/dev/vdc /data/docker\\040root xfs rw 0 0\n"));
  CHECK_FALSE(supports_storage_quota(xfs, "/dev/vdb /dat xfs rw,prjquota 0 0\n"));  // not a parent of the root
  CHECK_FALSE(supports_storage_quota({"devicemapper", "xfs", "/data"}, "/dev/vdb /data xfs rw,prjquota 0 0\n"));
  CHECK(parse_storage_info(json::array()).driver.empty());
}
