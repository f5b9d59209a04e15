#include "process/private_files.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "process/fd.hpp"

namespace sandfort::agent {

result<std::string> make_private_dir(const std::string& base, std::string_view prefix) {
  std::vector<std::string> bases;
  if (!base.empty())
    bases.push_back(base);
  else
    bases = {"/dev/shm", "/tmp", "/run/sandfort"};
  int last_error = 0;
  for (const auto& each : bases) {
    std::error_code ignored;
    std::filesystem::create_directories(each, ignored);
    std::string tmpl = each + "/" + std::string(prefix) + "XXXXXX";
    if (::mkdtemp(tmpl.data())) return tmpl;
    last_error = errno;
  }
  return make_error(errc::unavailable,
                    "no writable place for the agent's files (" + bases.front() + ": " + errno_text(last_error) + ")");
}

bool write_new_file(const std::string& path, std::string_view text) {
  ::unlink(path.c_str());
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) return false;
  while (!text.empty()) {
    ssize_t n = ::write(fd.get(), text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace sandfort::agent
