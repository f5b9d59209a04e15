// The process's gauges: read from a /proc laid out by the test (exact numbers), and from the
// real one (plausible numbers).
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "../store/temp_dir.hpp"
#include "sandfort/metrics/process.hpp"

using namespace sandfort;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

}  // namespace

TEST_CASE("process: fds, resident memory and uptime from /proc files", "[metrics]") {
  testing::temp_dir dir;
  auto self = dir.path() / "self";
  std::filesystem::create_directories(self / "fd");
  for (const char* fd : {"0", "1", "2", "7"}) write((self / "fd" / fd).string(), "");
  write((self / "statm").string(), "5000 300 100 10 0 200 0\n");
  // The command holds spaces and a ')': fields are counted from the last ')'. Start: 1000 ticks.
  std::string stat = "4242 (sand fortd) x) S";
  for (int field = 4; field <= 21; ++field) stat += " " + std::to_string(field);
  stat += " 1000 99 98\n";
  write((self / "stat").string(), stat);
  write((dir.path() / "uptime").string(), "250.50 100.00\n");

  auto s = metrics::read_process_stats(self.string(), dir.file("uptime"));
  REQUIRE(s.open_fds);
  CHECK(*s.open_fds == 4);
  REQUIRE(s.resident_bytes);
  CHECK(*s.resident_bytes == 300u * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
  REQUIRE(s.uptime_seconds);
  CHECK(*s.uptime_seconds == Approx(250.5 - 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK))));

  metrics::registry r;
  metrics::update_process_metrics(r, s);
  auto text = r.render();
  CHECK(text.find("\nsandfort_process_open_fds 4\n") != std::string::npos);
  CHECK(text.find("# TYPE sandfort_process_resident_memory_bytes gauge\n") != std::string::npos);
  CHECK(text.find("\nsandfort_process_uptime_seconds ") != std::string::npos);
}

TEST_CASE("process: what cannot be read is left out", "[metrics]") {
  testing::temp_dir dir;
  auto s = metrics::read_process_stats(dir.file("missing"), dir.file("missing-uptime"));
  CHECK_FALSE(s.open_fds);
  CHECK_FALSE(s.resident_bytes);
  CHECK_FALSE(s.uptime_seconds);
}

TEST_CASE("process: the real /proc/self counts a descriptor opened here", "[metrics]") {
  auto before = metrics::read_process_stats();
  REQUIRE(before.open_fds);
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto during = metrics::read_process_stats();
  ::close(fd);
  REQUIRE(during.open_fds);
  CHECK(*during.open_fds == *before.open_fds + 1);
  REQUIRE(during.resident_bytes);
  CHECK(*during.resident_bytes > 1u << 20);
  REQUIRE(during.uptime_seconds);
  CHECK(*during.uptime_seconds >= 0);
  CHECK(*during.uptime_seconds < 3600);
  REQUIRE(during.max_fds);
  CHECK(*during.max_fds >= *during.open_fds);
}
