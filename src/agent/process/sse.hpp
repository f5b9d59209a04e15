#pragma once
// Server-sent events on an agent connection: the output_sink that streaming exec (one-shot
// or in a session) and followed command logs write to. Events carry JSON so that \r, NUL and
// newlines survive: `event: stdout` / `event: stderr` with `data: {"data":"<text>"}` (invalid
// UTF-8 replaced; `data_b64` too when binary output was asked for), and whatever final event
// the caller sends (`exit`).
//
// The response starts lazily with the first event, so an error found before any output is
// still answered as a plain JSON error with its own status.

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "process/async.hpp"
#include "process/output.hpp"
#include "sandfort/http/stream.hpp"

namespace sandfort::agent {


class sse_writer final : public output_sink {
 public:
  explicit sse_writer(http::exchange& ex, bool binary = false);

  boost::asio::awaitable<bool> write(output_stream which, std::string_view bytes) override;
  boost::asio::awaitable<void> wait_gone() override;
  bool gone_now() override;

  // Sends the response header now (200, text/event-stream); otherwise the first event does.
  // Callers that may stay silent for long start early: a proxy waits for the header.
  boost::asio::awaitable<bool> begin();
  // Any event with a JSON payload. False once the client is gone.
  boost::asio::awaitable<bool> send(std::string_view event, const nlohmann::json& data);
  // A comment line (": keep-alive"): ignored by readers, it tells a quiet stream's proxies and
  // relays that the stream lives, and a relay whose client left finds out by writing it.
  boost::asio::awaitable<bool> keep_alive();
  // Ends the response (starting it first if nothing was sent). Returns whether the connection
  // may serve another request.
  boost::asio::awaitable<bool> finish();

  bool started() const { return started_; }
  bool failed() const { return failed_; }

 private:
  boost::asio::awaitable<bool> send_frame(std::string frame);
  boost::asio::awaitable<void> start_locked();

  http::exchange& ex_;
  http::chunked_writer writer_;
  fifo_mutex order_;  // stdout and stderr are read concurrently; their events must not interleave
  boost::asio::steady_timer gone_signal_;  // cancelled when a write fails
  bool binary_;
  bool started_ = false;
  bool failed_ = false;
};

// {"error": {"code", "message"}}: how an error after the start of the stream is told.
nlohmann::json error_json(const error& e);

// The JSON of one output chunk: {"data": text} (+ "data_b64" when binary).
nlohmann::json chunk_json(std::string_view bytes, bool binary);
// JSON text with invalid UTF-8 replaced (output is raw bytes).
std::string dump_json(const nlohmann::json& j);

// True when the request's query string has name=true (or 1).
bool query_flag(const http::bhttp::request_header<>& header, const std::string& name);

}  // namespace sandfort::agent
