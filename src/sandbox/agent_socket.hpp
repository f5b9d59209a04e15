#pragma once
// Opening a connection to a sandbox's agent so that it provably ends in that sandbox.
//
// The socket lives in the container's own tmpfs (/run/sandfort), which root inside the sandbox
// controls completely: it may replace agent.sock with a symlink (to another sandbox's socket, to
// docker.sock) or with a server of its own. So the host never resolves that path itself: it walks
// it inside the container's root (/proc/<init pid>/root) with openat2(RESOLVE_IN_ROOT |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), connects through /proc/self/fd/N to exactly the
// inode it found, and then asks the kernel who listens there (SO_PEERCRED): a peer outside the
// container's pid namespace is refused. A server of the sandbox's own making passes — it is that
// sandbox talking to its own caller, and everything it says is bounded untrusted input.
//
// Private to the sandbox module: everything else reaches the agent through agent_connector.hpp,
// which holds container_identity (what the connector remembers of each container).

#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/sandbox/agent_connector.hpp"

namespace sandfort::sandbox {

// The identity of process `pid`, which Docker reported as the init of container `container_id`.
// Its cgroup must name the container, so a pid that was reused between Docker's answer and this
// call is refused (errc::unavailable: the container is gone).
result<container_identity> identify_container(int pid, const std::string& container_id);

// A connected, non-blocking unix socket (an fd the caller owns) to `path` inside the root of
// `who.init_pid`, or an error: errc::unavailable when nothing answers there (no socket yet, the
// container gone, a full backlog); errc::permission_denied when the path holds a link or a
// non-socket, or the listener is not in the container — that is an attack, and logged as one.
result<int> connect_in_container(const container_identity& who, std::string_view path_in_root);

}  // namespace sandfort::sandbox
