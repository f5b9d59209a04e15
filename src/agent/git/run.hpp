#pragma once
// Runs one git command to completion: like process/runner.hpp's run() (its own session, output
// captured per stream with a cap, a timeout that kills the whole session, stdin at EOF), plus
// the credentials' memfd on descriptor 3 when there are credentials (see credentials.hpp).

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <optional>

#include "git/request.hpp"
#include "process/runner.hpp"

namespace sandfort::agent::git {

struct run_options {
  std::chrono::milliseconds timeout{3'600'000};
  std::size_t max_output_bytes = std::size_t{10} << 20;  // per stream
};

// Errors: unavailable (no descriptors or processes left). A git that cannot be found is a
// result with exit code 127, as with exec.
boost::asio::awaitable<result<exec_result>> run_git(const command& cmd, const std::optional<credentials>& creds,
                                                    run_options options);

}  // namespace sandfort::agent::git
