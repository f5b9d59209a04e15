#include "agent_socket.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace sandfort::sandbox {

namespace {

// Closes on scope exit; release() hands the fd over.
class owned_fd {
 public:
  explicit owned_fd(int fd = -1) : fd_(fd) {}
  owned_fd(const owned_fd&) = delete;
  owned_fd& operator=(const owned_fd&) = delete;
  ~owned_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string errno_text(int e) { return std::strerror(e); }

result<struct stat> pid_ns_of(int pid) {
  struct stat st {};
  std::string path = "/proc/" + std::to_string(pid) + "/ns/pid";
  if (::stat(path.c_str(), &st) != 0)
    return make_error(errc::unavailable, "process " + std::to_string(pid) + " is gone: " + errno_text(errno));
  return st;
}

}  // namespace

result<container_identity> identify_container(int pid, const std::string& container_id) {
  if (pid <= 0 || container_id.size() < 12)
    return make_error(errc::unavailable, "the container is not running");
  std::ifstream cgroup("/proc/" + std::to_string(pid) + "/cgroup");
  std::stringstream text;
  text << cgroup.rdbuf();
  // runc puts every container in a cgroup named after its full id (docker-<id>.scope or
  // /docker/<id>); a process elsewhere with the same pid is not this container's init.
  if (!cgroup || text.str().find(container_id) == std::string::npos)
    return make_error(errc::unavailable, "process " + std::to_string(pid) + " is not the init of container " +
                                             container_id.substr(0, 12));
  auto ns = pid_ns_of(pid);
  if (!ns) return std::move(ns).err();
  return container_identity{pid, static_cast<std::uint64_t>(ns->st_dev), static_cast<std::uint64_t>(ns->st_ino)};
}

result<int> connect_in_container(const container_identity& who, std::string_view path_in_root) {
  std::string root_path = "/proc/" + std::to_string(who.init_pid) + "/root";
  owned_fd root(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return make_error(errc::unavailable, "the container is gone: " + errno_text(errno));

  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  std::string relative(path_in_root);
  owned_fd target(static_cast<int>(::syscall(SYS_openat2, root.get(), relative.c_str(), &how, sizeof how)));
  if (target.get() < 0) {
    int e = errno;
    if (e == ELOOP || e == EXDEV)
      return make_error(errc::permission_denied, "the agent socket path holds a link: " + errno_text(e));
    return make_error(errc::unavailable, "no agent socket: " + errno_text(e));
  }
  struct stat st {};
  if (::fstat(target.get(), &st) != 0 || !S_ISSOCK(st.st_mode))
    return make_error(errc::permission_denied, "the agent socket path does not hold a socket");

  owned_fd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) return make_error(errc::unavailable, "socket: " + errno_text(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Exactly the inode found above, whatever the path says by now.
  std::string via = "/proc/self/fd/" + std::to_string(target.get());
  std::memcpy(addr.sun_path, via.c_str(), via.size() + 1);
  // Non-blocking: a listener that never accepts fills its backlog, and connect() would then
  // block the I/O thread. EAGAIN is its answer instead.
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return make_error(errc::unavailable, "cannot connect to the agent: " + errno_text(errno));

  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(sock.get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.pid <= 0)
    return make_error(errc::unavailable, "cannot identify the agent: " + errno_text(errno));
  auto ns = pid_ns_of(peer.pid);
  if (!ns) return std::move(ns).err();
  if (static_cast<std::uint64_t>(ns->st_dev) != who.pid_ns_dev || static_cast<std::uint64_t>(ns->st_ino) != who.pid_ns_ino)
    return make_error(errc::permission_denied, "the process listening on the agent socket (pid " +
                                                   std::to_string(peer.pid) + ") is not in the sandbox's container");
  return sock.release();
}

}  // namespace sandfort::sandbox
