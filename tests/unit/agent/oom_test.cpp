// Reading the cgroup's OOM-kill counter (cgroup v1 and v2 files).

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "process/oom.hpp"
#include "support.hpp"

using namespace sandfort::agent;
using namespace sandfort::agent::test;

TEST_CASE("the oom_kill line is found in v1 and v2 files, and nothing else passes for it") {
  CHECK(parse_oom_kill("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n") == 3u);
  CHECK(parse_oom_kill("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n") == 2u);
  CHECK(parse_oom_kill("oom_kill 18446744073709551615") == 18446744073709551615u);
  // Kernels before 4.13 have no counter in memory.oom_control.
  CHECK_FALSE(parse_oom_kill("oom_kill_disable 0\nunder_oom 0\n"));
  CHECK_FALSE(parse_oom_kill(""));
  CHECK_FALSE(parse_oom_kill("oom_kill x\n"));
  CHECK_FALSE(parse_oom_kill("oom_kill -1\n"));
  CHECK_FALSE(parse_oom_kill("oom_kill 1 2\n"));
  CHECK_FALSE(parse_oom_kill("oom_group_kill 4\n"));
}

TEST_CASE("the counter is read from the v1 file, else the v2 file, else it is absent") {
  temp_dir root;
  CHECK_FALSE(oom_kill_count(root.path()));
  CHECK_FALSE(oom_kill_count(root / "nonexistent"));

  std::ofstream(root / "memory.events") << "oom 1\noom_kill 5\n";
  CHECK(oom_kill_count(root.path()) == 5u);

  std::filesystem::create_directories(root / "memory");
  std::ofstream(root / "memory/memory.oom_control") << "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n";
  CHECK(oom_kill_count(root.path()) == 7u);
}

TEST_CASE("the cgroup root is /sys/fs/cgroup until set") {
  CHECK(cgroup_root() == "/sys/fs/cgroup");
  set_cgroup_root("/tmp/elsewhere");
  CHECK(cgroup_root() == "/tmp/elsewhere");
  set_cgroup_root("/sys/fs/cgroup");
}
