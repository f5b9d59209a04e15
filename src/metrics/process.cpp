#include "sandfort/metrics/process.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace sandfort::metrics {

namespace {

std::optional<std::string> read_all(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

process_stats read_process_stats(const std::string& proc_self, const std::string& proc_uptime) {
  process_stats out;

  std::error_code ec;
  std::uint64_t fds = 0;
  for (std::filesystem::directory_iterator it(proc_self + "/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  // Our own live /proc/self/fd lists the descriptor the listing itself holds open: not counted.
  if (!ec) out.open_fds = proc_self == "/proc/self" && fds > 0 ? fds - 1 : fds;

  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    out.max_fds = static_cast<std::uint64_t>(lim.rlim_cur);

  // statm: size resident shared ... in pages.
  if (auto statm = read_all(proc_self + "/statm")) {
    std::istringstream s(*statm);
    std::uint64_t size = 0, resident = 0;
    long page = ::sysconf(_SC_PAGESIZE);
    if (s >> size >> resident && page > 0) out.resident_bytes = resident * static_cast<std::uint64_t>(page);
  }

  // stat's 22nd field is the start time in clock ticks since boot; the command (field 2) may
  // hold spaces and parentheses, so fields are counted from the last ')'.
  auto stat = read_all(proc_self + "/stat");
  auto uptime = read_all(proc_uptime);
  long ticks = ::sysconf(_SC_CLK_TCK);
  if (stat && uptime && ticks > 0) {
    auto close = stat->rfind(')');
    if (close != std::string::npos) {
      std::istringstream fields(stat->substr(close + 1));
      std::string field;
      std::uint64_t start_ticks = 0;
      bool found = false;
      for (int n = 3; fields >> field; ++n) {  // the first field after ')' is field 3 (state)
        if (n == 22) {
          start_ticks = std::stoull(field);
          found = true;
          break;
        }
      }
      double since_boot = 0;
      std::istringstream up(*uptime);
      if (found && up >> since_boot) {
        double started = static_cast<double>(start_ticks) / static_cast<double>(ticks);
        out.uptime_seconds = since_boot > started ? since_boot - started : 0;
      }
    }
  }
  return out;
}

void update_process_metrics(registry& r, const process_stats& s) {
  auto set = [&](const char* name, const char* help, const auto& v) {
    auto& g = r.gauge(name, help, {});
    if (v) g.set({}, static_cast<double>(*v));
  };
  set("sandfort_process_open_fds", "Open file descriptors of sandfortd.", s.open_fds);
  set("sandfort_process_max_fds", "The limit on open file descriptors (RLIMIT_NOFILE, soft).", s.max_fds);
  set("sandfort_process_resident_memory_bytes", "Resident memory of sandfortd in bytes.", s.resident_bytes);
  set("sandfort_process_uptime_seconds", "Seconds since sandfortd started.", s.uptime_seconds);
}

}  // namespace sandfort::metrics
