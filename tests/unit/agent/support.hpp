#pragma once
// Helpers for the agent tests: run a coroutine to completion, temp dirs, process checks.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "process/runner.hpp"
#include "support/run_coroutine.hpp"

namespace sandfort::agent::test {

using sandfort::testing::run_coroutine;

// Writes content to path (its mode set when given; otherwise as the umask leaves it).
inline void write_file(const std::string& path, std::string_view content, std::optional<mode_t> mode = std::nullopt) {
  {
    std::ofstream out(path, std::ios::binary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  }
  if (mode) ::chmod(path.c_str(), *mode);
}

// A file's permission bits (lstat: a symlink's own).
inline unsigned mode_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) throw std::runtime_error("lstat " + path + " failed");
  return static_cast<unsigned>(st.st_mode & 07777);
}

inline result<exec_result> run_sync(exec_request req) { return run_coroutine(run(std::move(req))); }

inline exec_request shell(std::string command) {
  exec_request req;
  req.argv = {"/bin/sh", "-c", std::move(command)};
  return req;
}

class temp_dir {
 public:
  temp_dir() {
    char tmpl[] = "/tmp/sfa-XXXXXX";  // short: unix socket paths must stay under 108 bytes
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool is_zombie(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

// Waits (bounded) until pid is dead: reaped by us when we are its subreaper, gone, or a
// zombie waiting for some other reaper. Returns false if it is still running at the deadline.
inline bool wait_gone(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && (::kill(pid, 0) != 0 || is_zombie(pid))) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace sandfort::agent::test
