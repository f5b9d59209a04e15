// Checkpoints as JSON lines: the API's form and the export file's.
#include "sandfort/audit/checkpoint_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace sandfort::audit {

nlohmann::json checkpoint_json(const audit::checkpoint_record& c) {
  return {{"org_id", c.org_id}, {"seq", c.seq},       {"head_hash", c.head_hash},
          {"ts", c.ts},         {"key_id", c.key_id}, {"signature", c.signature}};
}

result<audit::checkpoint_record> checkpoint_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return make_error(errc::invalid_argument, "a checkpoint must be a JSON object");
  // The mistake worth naming: a line of the event export (`sandfort audit export`) given as a checkpoint.
  if (!j.contains("head_hash") && j.contains("prev_hash") && j.contains("hash"))
    return make_error(errc::invalid_argument,
                      "an audit event, not a checkpoint: checkpoints are the lines of audit.export_path, of "
                      "GET /v1/audit/checkpoints or of `sandfort audit checkpoints -o FILE`");
  audit::checkpoint_record c;
  for (auto [name, field] :
       {std::pair{"org_id", &c.org_id}, std::pair{"head_hash", &c.head_hash}, std::pair{"ts", &c.ts},
        std::pair{"key_id", &c.key_id}, std::pair{"signature", &c.signature}}) {
    auto it = j.find(name);
    if (it == j.end() || !it->is_string())
      return make_error(errc::invalid_argument, std::string("checkpoint field '") + name + "' must be a string");
    *field = it->get<std::string>();
  }
  auto seq = j.find("seq");
  if (seq == j.end() || !seq->is_number_integer())
    return make_error(errc::invalid_argument, "checkpoint field 'seq' must be an integer");
  c.seq = seq->get<std::int64_t>();
  return c;
}

result<void> export_checkpoint(const std::string& path, const audit::checkpoint_record& c) {
  const std::string line = checkpoint_json(c).dump() + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return make_error(errc::internal,
                      "audit: cannot open checkpoint export file " + path + ": " + std::strerror(errno));
  // One write: with O_APPEND the line lands whole after whatever another writer appended.
  ssize_t n;
  do n = ::write(fd, line.data(), line.size());
  while (n < 0 && errno == EINTR);
  const int write_errno = errno;
  const bool synced = n == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  const int sync_errno = errno;
  ::close(fd);
  if (!synced) {
    const int e = n < 0 ? write_errno : sync_errno;
    return make_error(errc::internal,
                      "audit: cannot append to checkpoint export file " + path + ": " +
                          (n >= 0 && n != static_cast<ssize_t>(line.size()) ? "short write" : std::strerror(e)));
  }
  return {};
}

result<std::vector<audit::checkpoint_record>> read_checkpoint_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::not_found, "cannot open checkpoint file " + path + ": " + std::strerror(errno));
  std::vector<audit::checkpoint_record> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto c = parsed.is_discarded() ? result<audit::checkpoint_record>(make_error(errc::invalid_argument, "not JSON"))
                                   : checkpoint_from_json(parsed);
    if (!c) return make_error(errc::invalid_argument, path + ":" + std::to_string(number) + ": " + c.err().message);
    out.push_back(std::move(*c));
  }
  if (in.bad()) return make_error(errc::internal, "cannot read checkpoint file " + path);
  return out;
}

}  // namespace sandfort::audit
