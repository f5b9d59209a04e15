#pragma once
// Where a command's output goes while it runs: kept (the whole answer at the end) or handed
// to a sink as it is read (streaming). The sink is abstract so that the process code knows
// nothing of HTTP; the HTTP side implements it with server-sent events.

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace sandfort::agent {

enum class output_stream { out, err };

// What one read of an output pipe goes into: the pipe's default capacity, and not zeroed (only
// what a read fills is used; zeroing two of them cost every exec 128 KiB of memset).
inline constexpr std::size_t pipe_read_chunk = 64 * 1024;
inline std::unique_ptr<char[]> pipe_read_buffer() { return std::make_unique_for_overwrite<char[]>(pipe_read_chunk); }

std::string_view to_string(output_stream s);

class output_sink {
 public:
  virtual ~output_sink() = default;
  // One piece of output, in order per stream. False: nobody listens any more; the producer
  // stops the command at once.
  virtual boost::asio::awaitable<bool> write(output_stream which, std::string_view bytes) = 0;
  // Completes when the receiver is gone (never while it listens), so that a silent command is
  // stopped as soon as its caller leaves, not only at its next output. Cancellable.
  virtual boost::asio::awaitable<void> wait_gone() = 0;
  // True when it is already known that nobody listens (checked before starting work).
  virtual bool gone_now() { return false; }
};

// The length of the longest prefix of bytes that does not end inside a UTF-8 sequence that
// later bytes could still complete. Invalid bytes count as complete (they are replaced later).
std::size_t complete_utf8_prefix(std::string_view bytes);

// One stream of one command: applies the per-stream cap (what is beyond it is dropped and
// counted as truncation) and either keeps the bytes or forwards them to a sink, holding back
// a UTF-8 sequence split between two reads so that no character is cut in two events.
class output_collector {
 public:
  output_collector(output_stream which, std::size_t cap, output_sink* sink) : which_(which), cap_(cap), sink_(sink) {}

  boost::asio::awaitable<void> add(std::string_view bytes);
  // Forwards what was held back; call once the stream is complete.
  boost::asio::awaitable<void> finish();

  bool streaming() const { return sink_ != nullptr; }
  bool truncated() const { return truncated_; }
  bool sink_failed() const { return sink_failed_; }
  std::string& data() { return data_; }  // kept bytes (empty when streaming)

 private:
  boost::asio::awaitable<void> forward(std::string_view bytes);

  output_stream which_;
  std::size_t cap_;
  output_sink* sink_;
  std::size_t taken_ = 0;  // bytes kept or forwarded so far
  bool truncated_ = false;
  bool sink_failed_ = false;
  std::string data_;
  std::string carry_;  // an incomplete UTF-8 sequence awaiting its continuation bytes
};

}  // namespace sandfort::agent
