// pull_image against a real registry: Debian's docker-registry, started by the test on a free
// loopback port with its own small config (the packaged one demands htpasswd auth).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "sandfort/docker/engine.hpp"
#include "support.hpp"
#include "unix_engine.hpp"

using namespace sandfort;
using namespace sandfort::docker;
using test::run;
namespace fs = std::filesystem;

namespace {

constexpr const char* registry_binary = "/usr/bin/docker-registry";

// A port that was free a moment ago (the registry cannot report the port it picked itself).
unsigned short free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  REQUIRE(ok);
  return ntohs(addr.sin_port);
}

bool port_answers(unsigned short port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The registry process and its storage; stopped and removed when it goes out of scope.
class test_registry {
 public:
  test_registry() {
    char dir_template[] = "/tmp/sf-registry-XXXXXX";
    REQUIRE(::mkdtemp(dir_template) != nullptr);
    dir_ = dir_template;
    port_ = free_loopback_port();
    std::ofstream(dir_ / "config.yml") << "version: 0.1\n"
                                          "log:\n  level: warn\n"
                                          "storage:\n  filesystem:\n    rootdirectory: "
                                       << (dir_ / "storage").string()
                                       << "\n"
                                          "http:\n  addr: 127.0.0.1:"
                                       << port_ << "\n";
    start();
  }
  ~test_registry() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      for (int i = 0; i < 50 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (::waitpid(pid_, &status, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
      }
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  test_registry(const test_registry&) = delete;
  test_registry& operator=(const test_registry&) = delete;

  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  const fs::path& dir() const { return dir_; }

 private:
  void start() {
    auto config = (dir_ / "config.yml").string();
    auto log = (dir_ / "registry.log").string();
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execl(registry_binary, registry_binary, "serve", config.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      if (port_answers(port_)) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL("docker-registry exited at start-up:\n" << read_file(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL("docker-registry did not listen on " << host() << " within 10 s:\n" << read_file(log));
  }

  fs::path dir_;
  unsigned short port_ = 0;
  pid_t pid_ = -1;
};

// Removes the local image tag when it goes out of scope.
struct image_remover {
  std::string ref;
  ~image_remover() { (void)test::run_command({"docker", "rmi", "-f", ref}); }
};

}  // namespace

TEST_CASE("an image pushed to a registry is pulled through the engine", "[docker][registry]") {
  if (!test::docker_tests_enabled()) return;
  if (::access(registry_binary, X_OK) != 0)
    FAIL(registry_binary << " is missing: the Debian package docker-registry is needed; run scripts/setup");

  test_registry registry;
  auto token = test::unique_token();
  const std::string ref = registry.host() + "/sandfort/pulltest:" + token;
  image_remover remove_at_end{ref};

  // A one-file image is enough to exercise the pull, and pushes in a moment.
  auto rootfs = registry.dir() / "rootfs";
  fs::create_directories(rootfs);
  std::ofstream(rootfs / "hello.txt") << "pulled through sandfort\n";
  auto tarball = (registry.dir() / "image.tar").string();
  auto tar = test::run_command({"tar", "-C", rootfs.string(), "-cf", tarball, "."});
  REQUIRE(tar.exit_code == 0);
  auto imported = test::run_command({"docker", "import", tarball, ref});
  INFO(imported.output);
  REQUIRE(imported.exit_code == 0);
  auto pushed = test::run_command({"docker", "push", ref});
  INFO(pushed.output);
  REQUIRE(pushed.exit_code == 0);
  auto untagged = test::run_command({"docker", "rmi", ref});
  INFO(untagged.output);
  REQUIRE(untagged.exit_code == 0);

  unix_engine engine(unix_engine_options{.pull_timeout = std::chrono::milliseconds(120'000)});
  auto before = run(engine.image_exists(ref));
  REQUIRE(before.ok());
  REQUIRE_FALSE(*before);

  auto pulled = run(engine.pull_image(ref));
  INFO((pulled.ok() ? std::string("pulled") : pulled.err().message));
  REQUIRE(pulled.ok());
  auto after = run(engine.image_exists(ref));
  REQUIRE(after.ok());
  CHECK(*after);

  // A tag the registry does not have: the failure arrives inside the stream.
  const std::string missing = registry.host() + "/sandfort/pulltest:nosuch-" + token;
  image_remover remove_missing{missing};
  auto not_there = run(engine.pull_image(missing));
  REQUIRE_FALSE(not_there.ok());
  CHECK(not_there.err().code == errc::not_found);
  CHECK_THAT(not_there.err().message, Catch::StartsWith("image \"" + missing + "\" could not be pulled: "));
}
