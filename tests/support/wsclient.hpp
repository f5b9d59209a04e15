#pragma once
// A small WebSocket client (Beast underneath) for the tests: connect over TCP or a unix
// socket with extra upgrade headers, send binary or text messages, read messages, close.
// Connecting and the upgrade are bounded by deadlines; errors are values.
//
// Like a Beast stream: at most one read and one write (send or close) in flight at a time;
// a read and a write may run concurrently.

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::wsclient {

struct options {
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds handshake_timeout{5'000};  // the upgrade exchange, and close()
  std::uint64_t max_message_bytes = 16u << 20;
  // Added to the upgrade request: Authorization, Sec-WebSocket-Protocol, ...
  std::vector<std::pair<std::string, std::string>> headers;
};

// One message from the server, or the server's close frame (is_close; data is its reason).
struct frame {
  bool is_text = false;
  std::string data;
  bool is_close = false;
  std::uint16_t close_code = 0;
};

class client {
 public:
  // target is the path and query ("/pty?cols=80"). Errors: unavailable (no connection, a
  // deadline passed, not a WebSocket server); an HTTP refusal of the upgrade comes back with the
  // class of its status (400 → invalid_argument, 404 → not_found, ...) and its body in the message.
  static boost::asio::awaitable<result<client>> connect(std::string host, std::uint16_t port, std::string target,
                                                        options opts);
  static boost::asio::awaitable<result<client>> connect_unix(std::string socket_path, std::string target,
                                                             options opts);

  client(client&&) noexcept;
  client& operator=(client&&) noexcept;
  ~client();

  boost::asio::awaitable<result<void>> send_binary(std::string_view bytes);
  boost::asio::awaitable<result<void>> send_text(std::string_view text);

  // The next message. With a deadline, a read that does not complete in time fails and drops
  // the connection (an interrupted WebSocket read cannot be resumed). After a close frame,
  // reads fail.
  boost::asio::awaitable<result<frame>> read(std::optional<std::chrono::milliseconds> deadline);

  // The closing handshake (bounded by handshake_timeout); the connection is gone afterwards.
  boost::asio::awaitable<result<void>> close(std::uint16_t code);
  // Drops the connection at once, without a closing handshake (what a crashed peer does).
  void abort();

  // A header of the server's 101 answer (Sec-WebSocket-Protocol, X-Request-Id, ...).
  std::optional<std::string> response_header(std::string_view name) const;

  struct transport;

 private:
  explicit client(std::unique_ptr<transport> t);
  std::unique_ptr<transport> t_;
};

}  // namespace sandfort::wsclient
