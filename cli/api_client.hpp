#pragma once
// A synchronous HTTP/1.1 client for the sandfortd REST API over TCP, or TLS for https://. The CLI is
// short-lived and does one thing at a time, so plain blocking Beast calls are the simplest fit.
// Connecting has a deadline; reading does not (an exec may legitimately run for minutes).

#include <boost/beast/http/verb.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "credentials.hpp"

namespace sandfort::cli {

using verb = boost::beast::http::verb;

struct response {
  unsigned status = 0;
  std::string body;  // empty when the body went to a chunk callback
  std::string request_id;
  std::string next_cursor;  // X-Next-Cursor: where a paged JSON Lines export continues
  std::string retry_after;  // Retry-After (seconds) of a 429 rate_limited
};

struct request_spec {
  verb method = verb::get;
  std::string target;  // path and query, below the base URL
  std::string body;
  // Instead of body: called for the next piece until it returns 0; body_size when known.
  std::function<std::size_t(char*, std::size_t)> body_source;
  std::optional<std::uint64_t> body_size;
  std::string content_type;
  std::string accept = "application/json";
  // Called with each piece of a 2xx body as it arrives (SSE, downloads); when empty the body
  // is collected into response::body. Error bodies are always collected.
  std::function<void(std::string_view)> on_chunk;
};

class api_client {
 public:
  api_client(std::string base_url, std::shared_ptr<credentials> creds);

  // A 401 means the daemon did nothing: with renewed credentials the request is sent once more,
  // unless its body came from body_source (it cannot be read twice).
  response send(const request_spec& spec);

  // JSON in, JSON out; a non-2xx answer becomes a failure carrying the API's message.
  nlohmann::json call(verb method, const std::string& target, const nlohmann::json* body = nullptr);

  const std::string& base_url() const { return base_url_; }
  // What a failure to reach the daemon suggests (default: not_reachable_hint).
  void set_unreachable_hint(const char* hint) { unreachable_hint_ = hint; }
  // For connections made outside send() (the PTY WebSocket).
  std::string bearer() { return creds_->bearer(); }
  bool renew(const std::string& refused) { return creds_->renew(refused); }
  const std::string& host() const { return host_; }
  const std::string& port() const { return port_; }
  const std::string& prefix() const { return prefix_; }
  bool tls() const { return tls_; }

 private:
  response send_once(const request_spec& spec, const std::string& token);

  std::string base_url_;
  std::shared_ptr<credentials> creds_;
  std::string host_;
  std::string port_;
  std::string prefix_;
  bool tls_ = false;
  const char* unreachable_hint_ = nullptr;
};

// Throws the failure for an error answer: "error: <message> (<code>, request <id>)", and a hint
// for the errors a user can act on (credentials refused, rate limit, quota, image policy).
[[noreturn]] void throw_api_error(const response& r);

// A client for the daemon the configuration names (failure when there is none).
api_client connect_api();

// Percent-encodes a query value.
std::string url_encode(std::string_view s);

// Splits a text/event-stream into (event, data) pairs.
class sse_parser {
 public:
  using handler = std::function<void(const std::string& event, const std::string& data)>;
  explicit sse_parser(handler on_event) : on_event_(std::move(on_event)) {}
  void feed(std::string_view bytes);

 private:
  void line(std::string_view l);
  handler on_event_;
  std::string pending_;
  std::string event_;
  std::string data_;
};

}  // namespace sandfort::cli
