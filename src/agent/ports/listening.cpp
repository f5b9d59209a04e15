#include "ports/listening.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace sandfort::agent::ports {
namespace {

std::optional<std::uint64_t> parse_hex(std::string_view s) {
  if (s.empty() || s.size() > 16) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    unsigned d;
    if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
    else if (c >= 'A' && c <= 'F') d = static_cast<unsigned>(c - 'A' + 10);
    else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
    else return std::nullopt;
    v = v * 16 + d;
  }
  return v;
}

// The kernel prints each 32-bit word of the address as a host-order integer in hex.
std::optional<std::string> parse_address(std::string_view hex, bool ipv6) {
  std::size_t words = ipv6 ? 4 : 1;
  if (hex.size() != words * 8) return std::nullopt;
  unsigned char bytes[16];
  for (std::size_t w = 0; w < words; ++w) {
    auto v = parse_hex(hex.substr(w * 8, 8));
    if (!v) return std::nullopt;
    auto word = static_cast<std::uint32_t>(*v);
    std::memcpy(bytes + w * 4, &word, 4);
  }
  char text[INET6_ADDRSTRLEN];
  if (!::inet_ntop(ipv6 ? AF_INET6 : AF_INET, bytes, text, sizeof text)) return std::nullopt;
  return std::string(text);
}

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_number(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// inode → pid, for the inodes wanted, from the fd links of every process we may read.
std::map<std::uint64_t, int> owners(const std::string& proc, std::set<std::uint64_t> wanted) {
  std::map<std::uint64_t, int> found;
  DIR* procdir = ::opendir(proc.c_str());
  if (!procdir) return found;
  std::vector<int> pids;
  while (struct dirent* d = ::readdir(procdir))
    if (is_number(d->d_name)) pids.push_back(std::atoi(d->d_name));
  ::closedir(procdir);
  std::sort(pids.begin(), pids.end());  // the lowest pid owns a socket shared after fork()

  for (int pid : pids) {
    if (wanted.empty()) break;
    std::string fd_dir = proc + "/" + std::to_string(pid) + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (!fds) continue;  // gone, or not ours to read
    while (struct dirent* d = ::readdir(fds)) {
      if (!is_number(d->d_name)) continue;
      char link[64];
      std::string fd_path = fd_dir + "/" + d->d_name;
      ssize_t n = ::readlink(fd_path.c_str(), link, sizeof link - 1);
      if (n <= 0) continue;
      std::string_view target(link, static_cast<std::size_t>(n));
      if (target.substr(0, 8) != "socket:[" || target.back() != ']') continue;
      std::string_view digits = target.substr(8, target.size() - 9);
      if (!is_number(digits)) continue;
      std::uint64_t inode = std::stoull(std::string(digits));
      if (wanted.erase(inode)) found.emplace(inode, pid);
    }
    ::closedir(fds);
  }
  return found;
}

}  // namespace

std::vector<listening_port> parse_proc_net_tcp(std::string_view text, bool ipv6) {
  std::vector<listening_port> out;
  bool header = true;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (header) {  // "  sl  local_address rem_address   st ..."
      header = false;
      continue;
    }
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    auto f = fields_of(line);
    if (f.size() < 10 || f[3] != "0A") continue;
    auto colon = f[1].find(':');
    if (colon == std::string_view::npos) continue;
    auto address = parse_address(f[1].substr(0, colon), ipv6);
    auto port = parse_hex(f[1].substr(colon + 1));
    if (!address || !port || *port > 65535 || !is_number(f[9])) continue;
    listening_port p;
    p.port = static_cast<unsigned>(*port);
    p.address = std::move(*address);
    p.ipv6 = ipv6;
    p.inode = std::stoull(std::string(f[9]));
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<listening_port> listening_tcp_ports(const std::string& proc) {
  std::vector<listening_port> all = parse_proc_net_tcp(read_text(proc + "/net/tcp"), false);
  std::vector<listening_port> v6 = parse_proc_net_tcp(read_text(proc + "/net/tcp6"), true);
  all.insert(all.end(), std::make_move_iterator(v6.begin()), std::make_move_iterator(v6.end()));

  // SO_REUSEPORT listeners share a port and address: one row each.
  std::sort(all.begin(), all.end(), [](const listening_port& a, const listening_port& b) {
    if (a.port != b.port) return a.port < b.port;
    if (a.address != b.address) return a.address < b.address;
    return a.inode < b.inode;
  });
  all.erase(std::unique(all.begin(), all.end(),
                        [](const listening_port& a, const listening_port& b) {
                          return a.port == b.port && a.address == b.address;
                        }),
            all.end());

  std::set<std::uint64_t> wanted;
  for (const auto& p : all)
    if (p.inode != 0) wanted.insert(p.inode);
  auto found = owners(proc, std::move(wanted));
  for (auto& p : all) {
    auto it = found.find(p.inode);
    if (it == found.end()) continue;
    p.pid = it->second;
    std::string comm = read_text(proc + "/" + std::to_string(it->second) + "/comm");
    while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.pop_back();
    if (!comm.empty()) p.process = std::move(comm);
  }
  // The agent's own (the egress listener of a sandbox that dials home) is not the sandbox's.
  const int self = ::getpid();
  all.erase(std::remove_if(all.begin(), all.end(), [self](const listening_port& p) { return p.pid == self; }),
            all.end());
  return all;
}

}  // namespace sandfort::agent::ports
