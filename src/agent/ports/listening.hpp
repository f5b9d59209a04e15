#pragma once
// TCP ports listening inside the sandbox, as the kernel lists them in /proc/net/tcp{,6}
// (the agent's network namespace is the sandbox's), with the process that owns each socket
// when /proc/<pid>/fd says so. Knows nothing of HTTP or JSON.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandfort::agent::ports {

struct listening_port {
  unsigned port = 0;
  std::string address;  // "0.0.0.0", "::", "127.0.0.1", "::ffff:10.0.0.2", ...
  bool ipv6 = false;
  std::uint64_t inode = 0;
  std::optional<int> pid;            // the owner, when it could be found
  std::optional<std::string> process;  // its /proc/<pid>/comm
};

// The sockets in state LISTEN (0A) of one /proc/net/tcp or /proc/net/tcp6 text.
std::vector<listening_port> parse_proc_net_tcp(std::string_view text, bool ipv6);

// Both tables, deduplicated by port and address, sorted by port then address, each with its
// owner when readable. `proc` is the procfs mount (a seam for tests).
std::vector<listening_port> listening_tcp_ports(const std::string& proc = "/proc");

}  // namespace sandfort::agent::ports
