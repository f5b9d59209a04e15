#pragma once
// Background commands: `/bin/sh -c` in a session of its own, started and left running, with
// its output kept in bounded logs (the oldest bytes dropped first), its stdin a pipe that stays
// open for later writes, signals to its whole process group, and its record kept for a while
// after it exits (a timer forgets it). Knows nothing of HTTP or JSON.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution_context.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "process/output.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent::commands {

struct limits {
  std::size_t log_cap = std::size_t{1} << 20;      // per stream, --log-cap
  std::chrono::milliseconds retention{600'000};    // after exit, --command-retention-s
  std::size_t max_commands = 256;
};

// Applies to commands started afterwards (call before serving).
void configure(const limits& l);
const limits& current_limits();

// The last `cap` bytes of a stream, addressed by absolute offsets (bytes ever written), so
// that readers following it need no buffer of their own.
class log_ring {
 public:
  explicit log_ring(std::size_t cap) : cap_(cap) {}
  void append(std::string_view bytes);
  std::uint64_t end() const { return begin_ + bytes_.size(); }
  std::uint64_t begin() const { return begin_; }  // == bytes dropped so far
  // The kept bytes from offset on (from begin() if offset is older).
  std::string read_from(std::uint64_t offset) const;
  // What is kept, after a "[sandfort: N bytes dropped]\n" line when something was dropped.
  std::string text() const;

 private:
  std::size_t cap_;
  std::uint64_t begin_ = 0;
  std::deque<char> bytes_;
};

std::string dropped_marker(std::uint64_t n);

struct start_request {
  std::string command;
  std::string cwd;                          // empty: the agent's
  std::map<std::string, std::string> env;   // merged over the agent's environment
};

struct command_info {
  std::string id;
  int pid = 0;
  bool running = true;
  std::optional<int> exit_code;  // 128+N when killed by signal N
  std::string command;
  time_point started_at;
  std::optional<time_point> ended_at;
};

struct log_snapshot {
  std::string stdout_text;
  std::string stderr_text;
  std::uint64_t dropped_bytes = 0;  // both streams
};

// Per io_context (an Asio service): running commands are killed when it goes away.
class registry : public boost::asio::execution_context::service {
 public:
  using key_type = registry;
  static inline boost::asio::execution_context::id id;

  explicit registry(boost::asio::execution_context& ctx);
  ~registry() override;
  static registry& of(const boost::asio::any_io_executor& ex);

  // invalid_argument (empty command, bad cwd/env), conflict (max_commands all running),
  // unavailable (cannot start).
  result<command_info> start(const boost::asio::any_io_executor& ex, const start_request& req);
  std::vector<command_info> list() const;
  result<command_info> get(const std::string& command_id) const;
  result<log_snapshot> logs(const std::string& command_id) const;
  // Writes bytes to its stdin (in call order), then closes stdin if eof. conflict when stdin
  // is closed or the command stopped reading.
  boost::asio::awaitable<result<void>> write_stdin(const std::string& command_id, const std::string& bytes, bool eof);
  // Signals the whole process group. conflict when it has exited.
  result<void> signal(const std::string& command_id, int signo);
  // Streams what is buffered, then new output as it comes, to sink until the command exits
  // (its exit code) or the sink's receiver leaves (nullopt).
  boost::asio::awaitable<result<std::optional<int>>> follow(const std::string& command_id, output_sink& sink);

  // Drops the record (the retention timer calls this); its output readers stop.
  void forget(const std::string& command_id);

  struct command;

 private:
  void shutdown() override;
  std::shared_ptr<command> find(const std::string& command_id) const;

  std::vector<std::shared_ptr<command>> commands_;  // in start order
};

}  // namespace sandfort::agent::commands
