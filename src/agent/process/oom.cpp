#include "process/oom.hpp"

#include <charconv>
#include <fstream>
#include <sstream>
#include <utility>

namespace sandfort::agent {
namespace {

std::string& root_setting() {
  static std::string root = "/sys/fs/cgroup";
  return root;
}

std::optional<std::string> read_cgroup_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
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
