#pragma once
// A blocking Docker Engine client for `sandfortd backup` and `restore`: what the daemon's own
// engine (docker::unix_engine) keeps in memory, archives of volumes and images, is streamed here
// between the engine's socket and files, so a backup of any size takes no more memory than a
// buffer. Only these one-shot commands use it; the daemon never blocks on Docker.

#include <nlohmann/json.hpp>
#include <string>

#include "sandfort/core/error.hpp"

namespace sandfort::daemon {

struct engine_answer {
  unsigned status = 0;
  std::string body;
  // The body as JSON (null when it is not JSON).
  nlohmann::json json() const;
  // Docker's {"message": …}, or the body itself.
  std::string message() const;
};

class engine_files {
 public:
  // Connects once to ask GET /version and speaks the negotiated API version from then on.
  static result<engine_files> connect(const std::string& socket_path);

  // One request with a small body (JSON unless content_type says otherwise).
  result<engine_answer> call(const std::string& method, const std::string& target, const std::string& body = "",
                             const std::string& content_type = "application/json");
  // GET target into a new file at path (mode 0600); an answer other than 200 is an error naming it.
  result<std::uint64_t> download(const std::string& target, const std::string& path);
  // method target with the file at path as its body (application/x-tar).
  result<engine_answer> upload(const std::string& method, const std::string& target, const std::string& path);

 private:
  engine_files(std::string socket_path, std::string prefix) : socket_(std::move(socket_path)), prefix_(std::move(prefix)) {}
  std::string socket_;
  std::string prefix_;  // "/v1.41"
};

// Percent-encodes a query value.
std::string query_escape(const std::string& s);

}  // namespace sandfort::daemon
