#include "process/oom.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <map>
#include <mutex>
#include <utility>

namespace sandfort::agent {
namespace {

std::string& root_setting() {
  static std::string root = "/sys/fs/cgroup";
  return root;
}

// The counter files stay open: every exec reads the count twice, and a pread at offset 0 of a
// cgroup file (a seq_file) renders it anew, so one system call replaces open, read, read, close.
// A file that is not there is looked for again next time (the v1 file first, always); one that
// fails to read is opened again once.
std::optional<std::string> read_cgroup_file(const std::string& path) {
  static std::mutex guard;
  static std::map<std::string, int> kept;  // path → open fd: two per cgroup root at most
  std::lock_guard lock(guard);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto it = kept.find(path);
    if (it == kept.end()) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return std::nullopt;
      it = kept.emplace(path, fd).first;
    }
    char text[4096];  // memory.oom_control and memory.events are a few short lines
    const ssize_t n = ::pread(it->second, text, sizeof text, 0);
    if (n >= 0) return std::string(text, static_cast<std::size_t>(n));
    ::close(it->second);
    kept.erase(it);
  }
  return std::nullopt;
}

}  // namespace

void set_cgroup_root(std::string root) { root_setting() = std::move(root); }
const std::string& cgroup_root() { return root_setting(); }

std::optional<std::uint64_t> parse_oom_kill(std::string_view text) {
  constexpr std::string_view key = "oom_kill ";
  while (!text.empty()) {
    auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    // `oom_kill_disable 0` shares the prefix; only the exact key counts.
    if (!line.starts_with(key)) continue;
    std::string_view number = line.substr(key.size());
    std::uint64_t n = 0;
    auto [rest, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec == std::errc() && rest == number.data() + number.size()) return n;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> oom_kill_count(const std::string& root) {
  for (const char* file : {"/memory/memory.oom_control", "/memory.events"}) {
    auto text = read_cgroup_file(root + file);
    if (!text) continue;
    if (auto n = parse_oom_kill(*text)) return n;
  }
  return std::nullopt;
}

}  // namespace sandfort::agent
