#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fakes.hpp"
#include "sandfort/sandbox/gvisor_preload.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

std::vector<std::string> preloads_of(const docker::container_spec& c) {
  std::vector<std::string> out;
  for (const auto& e : c.env)
    if (e.starts_with("LD_PRELOAD=")) out.push_back(e);
  return out;
}

bool mounts_shim(const docker::container_spec& c, const std::string& host_path) {
  return std::ranges::any_of(c.binds, [&](const docker::bind_mount& b) {
    return b.host_path == host_path && b.container_path == gvisor_preload_in_container && b.read_only;
  });
}

}  // namespace

TEST_CASE("sandbox: a gVisor container preloads the statx shim, read-only, before a caller's own", "[sandbox][gvisor]") {
  fixture f;  // gvisor_runtime runsc
  create_request gvisor;
  gvisor.runtime = "gvisor";
  gvisor.wait = true;
  gvisor.env = {{"LD_PRELOAD", "/usr/lib/mine.so"}, {"A", "1"}};
  REQUIRE(f.create(f.org_a.id, gvisor));
  const auto& g = f.engine.created.back();
  CHECK(mounts_shim(g, gvisor_preload_path(f.cfg)));
  CHECK(preloads_of(g) == std::vector<std::string>{"LD_PRELOAD=/.sandfort/statx.so:/usr/lib/mine.so"});
  CHECK(std::ranges::count(g.env, std::string("A=1")) == 1);

  create_request alone = gvisor;
  alone.env.clear();
  REQUIRE(f.create(f.org_a.id, alone));
  CHECK(preloads_of(f.engine.created.back()) == std::vector<std::string>{"LD_PRELOAD=/.sandfort/statx.so"});

  // runc's coreutils work as they are: nothing mounted, a caller's LD_PRELOAD untouched.
  create_request runc = gvisor;
  runc.runtime = "runc";
  REQUIRE(f.create(f.org_a.id, runc));
  const auto& r = f.engine.created.back();
  CHECK_FALSE(mounts_shim(r, gvisor_preload_path(f.cfg)));
  CHECK(preloads_of(r) == std::vector<std::string>{"LD_PRELOAD=/usr/lib/mine.so"});
}

TEST_CASE("sandbox: the statx shim is written read-only under the state directory, replacing a copy", "[sandbox][gvisor]") {
  sandfort::testing::temp_dir dir;
  config cfg;
  cfg.state_dir = dir.file("state");
  const std::string path = gvisor_preload_path(cfg);
  CHECK(path == cfg.state_dir + "/gvisor/statx-shim.so");
  // A file of an earlier start, and a temporary one a start died with.
  std::filesystem::create_directories(cfg.state_dir + "/gvisor");
  std::ofstream(path) << "old";
  std::ofstream(path + ".new") << "half";
  REQUIRE(install_gvisor_preload(cfg));
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 1000);
  CHECK(bytes.substr(0, 4) == "\x7f" "ELF");  // a shared object, not a stub
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);
  CHECK_FALSE(std::filesystem::exists(path + ".new"));
  REQUIRE(install_gvisor_preload(cfg));  // again: a restart of sandfortd
  CHECK(std::filesystem::file_size(path) == bytes.size());
}
