// The door to a sandbox's agent, against the real kernel: a listener in another pid namespace
// plays the container's agent; links, non-sockets, strangers and full backlogs are refused.
#include "agent_socket.hpp"

#include "sandfort/sandbox/agent_connector.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "../store/temp_dir.hpp"

namespace {

using namespace sandfort;
using namespace sandfort::sandbox;

int listen_at(const std::string& path, int backlog) {
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(s, backlog) != 0) _exit(3);
  return s;
}

// A process in a pid namespace of its own (as an agent is in its container's), serving one byte
// per connection at `path`; killed when the test ends.
class namespaced_server {
 public:
  explicit namespaced_server(const std::string& path) {
    // Two pipes: the server says it listens to the helper, the helper then tells us its pid, so
    // the two writes can never interleave on one pipe.
    int listening[2], ready[2];
    REQUIRE(::pipe(listening) == 0);
    REQUIRE(::pipe(ready) == 0);
    helper_ = ::fork();
    REQUIRE(helper_ >= 0);
    if (helper_ == 0) {
      if (::unshare(CLONE_NEWPID) != 0) _exit(2);
      pid_t server = ::fork();
      if (server == 0) {
        ::close(ready[0]);
        ::close(ready[1]);
        ::close(listening[0]);
        int s = listen_at(path, 16);
        (void)!::write(listening[1], "r", 1);
        ::close(listening[1]);
        for (;;) {
          int c = ::accept(s, nullptr, nullptr);
          if (c >= 0) {
            (void)!::write(c, "x", 1);
            ::close(c);
          }
        }
      }
      ::close(listening[1]);  // so that a server that died leaves us EOF, not a wait
      char r = 0;
      if (::read(listening[0], &r, 1) != 1) _exit(4);
      (void)!::write(ready[1], &server, sizeof server);
      ::waitpid(server, nullptr, 0);
      _exit(0);
    }
    ::close(listening[0]);
    ::close(listening[1]);
    ::close(ready[1]);
    const auto got = ::read(ready[0], &pid_, sizeof pid_);
    ::close(ready[0]);
    if (got != sizeof pid_) {
      ::waitpid(helper_, nullptr, 0);  // it exits once its server did not come up
      FAIL("the namespaced server did not start");
    }
  }
  ~namespaced_server() {
    ::kill(pid_, SIGKILL);
    ::waitpid(helper_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t helper_ = -1;
  pid_t pid_ = -1;
};

container_identity identity_of(pid_t pid) {
  struct stat st {};
  REQUIRE(::stat(("/proc/" + std::to_string(pid) + "/ns/pid").c_str(), &st) == 0);
  // The tests' "containers" share this process's root: /proc/<our pid>/root is "/".
  return {::getpid(), static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

std::string in_root(const std::filesystem::path& p) { return p.string().substr(1); }

}  // namespace

TEST_CASE("agent socket: the container's own listener is reached through its root", "[sandbox][agent_socket]") {
  testing::temp_dir dir;
  auto path = dir.path() / "agent.sock";
  namespaced_server server(path.string());
  auto fd = connect_in_container(identity_of(server.pid()), in_root(path));
  REQUIRE(fd.ok());
  pollfd wait{*fd, POLLIN, 0};
  REQUIRE(::poll(&wait, 1, 5000) == 1);
  char got = 0;
  CHECK(::read(*fd, &got, 1) == 1);
  CHECK(got == 'x');
  ::close(*fd);
}

TEST_CASE("agent socket: a listener outside the container is an attack", "[sandbox][agent_socket]") {
  testing::temp_dir dir;
  auto path = dir.path() / "agent.sock";
  namespaced_server server(path.string());
  // The listener is in its own namespace; this process's namespace plays "the container".
  auto fd = connect_in_container(identity_of(::getpid()), in_root(path));
  REQUIRE_FALSE(fd.ok());
  CHECK(fd.err().code == errc::permission_denied);
  CHECK(fd.err().message.find("not in the sandbox's container") != std::string::npos);
}

TEST_CASE("agent socket: links and non-sockets on the path are refused", "[sandbox][agent_socket]") {
  testing::temp_dir dir;
  auto real = dir.path() / "real.sock";
  namespaced_server server(real.string());
  auto who = identity_of(server.pid());

  SECTION("a symlink to a real socket") {
    std::filesystem::create_symlink(real, dir.path() / "agent.sock");
    auto fd = connect_in_container(who, in_root(dir.path() / "agent.sock"));
    REQUIRE_FALSE(fd.ok());
    CHECK(fd.err().code == errc::permission_denied);
  }
  SECTION("a symlinked directory on the way") {
    std::filesystem::create_directory(dir.path() / "d");
    std::filesystem::create_directory_symlink(dir.path(), dir.path() / "d" / "up");
    auto fd = connect_in_container(who, in_root(dir.path() / "d" / "up" / "real.sock"));
    REQUIRE_FALSE(fd.ok());
    CHECK(fd.err().code == errc::permission_denied);
  }
  SECTION("a regular file") {
    std::ofstream(dir.path() / "agent.sock") << "not a socket";
    auto fd = connect_in_container(who, in_root(dir.path() / "agent.sock"));
    REQUIRE_FALSE(fd.ok());
    CHECK(fd.err().code == errc::permission_denied);
  }
  SECTION("nothing there yet") {
    auto fd = connect_in_container(who, in_root(dir.path() / "agent.sock"));
    REQUIRE_FALSE(fd.ok());
    CHECK(fd.err().code == errc::unavailable);
  }
}

TEST_CASE("agent socket: a listener that never accepts cannot block the caller", "[sandbox][agent_socket]") {
  testing::temp_dir dir;
  auto path = dir.path() / "agent.sock";
  int s = listen_at(path.string(), 0);
  container_identity me = identity_of(::getpid());
  // Fill the backlog; then connect must fail at once (EAGAIN), not wait for an accept.
  std::vector<int> held;
  bool refused = false;
  for (int i = 0; i < 64 && !refused; ++i) {
    auto fd = connect_in_container(me, in_root(path));
    if (fd)
      held.push_back(*fd);
    else
      refused = fd.err().code == errc::unavailable;
  }
  CHECK(refused);
  for (int fd : held) ::close(fd);
  ::close(s);
}

TEST_CASE("agent socket: a pid that is not the container's init is refused", "[sandbox][agent_socket]") {
  auto who = identify_container(::getpid(), std::string(64, 'a'));
  REQUIRE_FALSE(who.ok());
  CHECK(who.err().code == errc::unavailable);
  CHECK_FALSE(identify_container(0, std::string(64, 'a')).ok());
}

TEST_CASE("agent answers share one budget of bytes", "[sandbox][agent_socket]") {
  response_budget budget(100);
  CHECK(budget.try_take(60));
  CHECK_FALSE(budget.try_take(41));  // would go over: refused whole, nothing taken
  CHECK(budget.in_use() == 60);
  CHECK(budget.try_take(40));
  budget.give_back(60);
  CHECK(budget.in_use() == 40);
  budget.give_back(1000);  // more than held never wraps around
  CHECK(budget.in_use() == 0);
  CHECK_FALSE(budget.try_take(101));
}
