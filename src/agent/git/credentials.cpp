#include "git/credentials.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>

namespace sandfort::agent::git {
namespace {

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

void say(std::string_view message) {
  std::string line = "sandfort-agent askpass: " + std::string(message) + "\n";
  write_all(2, line);
}

bool is_credential_memfd(int fd) {
  char target[PATH_MAX];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return false;
  std::string_view t(target, static_cast<std::size_t>(n));
  return t.starts_with("/memfd:" + std::string(credential_fd_name));
}

}  // namespace

result<unique_fd> credential_fd(const credentials& c) {
  unique_fd fd(::memfd_create(std::string(credential_fd_name).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return make_error(errc::unavailable, "memfd_create failed: " + errno_text(errno));
  std::string content = c.username;
  content.push_back('\0');
  content += c.password;
  bool written = write_all(fd.get(), content);
  // Overwrite our copy; the caller's request still holds one until it is answered.
  std::fill(content.begin(), content.end(), '\0');
  if (!written) return make_error(errc::unavailable, "cannot write the credentials' memfd: " + errno_text(errno));
  // Nobody who inherits it may change what the next prompt reads.
  ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return fd;
}

bool is_askpass_call(int argc, char** argv) {
  if (argc != 2 || argv[1] == nullptr) return false;
  std::string_view prompt = argv[1];
  return prompt.starts_with("Username for ") || prompt.starts_with("Password for ");
}

int askpass_main(std::string_view prompt) {
  const int fd = credential_fd_number;
  if (!is_credential_memfd(fd)) {
    say("no credentials were given for this git command (pass username and password, or token)");
    return 1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (1 << 20)) {
    say("the credentials' memfd is unreadable");
    return 1;
  }
  std::string content(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < content.size()) {
    // pread: the offset is shared with every process holding the descriptor (git asks twice).
    ssize_t n = ::pread(fd, content.data() + got, content.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  content.resize(got);
  auto nul = content.find('\0');
  if (nul == std::string::npos) {
    say("the credentials' memfd is malformed");
    return 1;
  }
  std::string_view value = prompt.starts_with("Username")
                               ? std::string_view(content).substr(0, nul)
                               : std::string_view(content).substr(nul + 1);
  if (!prompt.starts_with("Username") && !prompt.starts_with("Password")) {
    say("unexpected prompt");
    return 1;
  }
  std::string line = std::string(value) + "\n";
  bool ok = write_all(1, line);
  std::fill(line.begin(), line.end(), '\0');
  std::fill(content.begin(), content.end(), '\0');
  return ok ? 0 : 1;
}

const std::string& self_path() {
  static const std::string path = [] {
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("/.sandfort/agent");
  }();
  return path;
}

}  // namespace sandfort::agent::git
