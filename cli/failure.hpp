#pragma once
// The one error type of the CLI: a message for the user and the exit status to leave with.

#include <stdexcept>
#include <string>

namespace sandfort::cli {

class failure : public std::runtime_error {
 public:
  explicit failure(const std::string& message, int exit_code = 1)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

}  // namespace sandfort::cli
