#pragma once
// A blocking POSIX client to 127.0.0.1 that sees exactly what a server put on the wire, with a
// deadline on every read: for tests of servers (http, the egress proxy, the preview router).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace sandfort::testing {

struct raw_response {
  int status = 0;
  std::string reason;  // the status line's reason phrase
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// A blocking TCP client with explicit deadlines on every read.
class raw_client {
 public:
  raw_client() = default;
  ~raw_client() { close(); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  // Returns 0, or the errno of a failed connect (ECONNREFUSED, ...). `source` is another
  // loopback address to connect from ("127.0.0.2"): a second client address for per-source limits.
  int connect(unsigned short port, const char* source = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return errno;
    if (source) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &from.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
        int err = errno;
        close();
        return err;
      }
    }
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      int err = errno;
      close();
      // A server that resets at accept can do so before a loaded machine returns from connect.
      reset_at_connect = err == ECONNRESET;
      return err;
    }
    return 0;
  }

  // The server reset the connection before connect() returned: it was closed at once.
  bool reset_at_connect = false;

  // False when the peer stopped accepting bytes (reset, closed, or blocked past SO_SNDTIMEO).
  bool send_all(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      auto n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }

  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Reads one response with a Content-Length body; nullopt on EOF, reset or timeout.
  std::optional<raw_response> read_response(std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    std::size_t end;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(deadline)) return std::nullopt;
    raw_response res;
    std::string head = pending_.substr(0, end);
    pending_.erase(0, end + 4);
    auto line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    res.status = std::stoi(status_line.substr(9, 3));
    if (status_line.size() > 13) res.reason = status_line.substr(13);
    std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      auto next = head.find("\r\n", pos);
      if (next == std::string::npos) next = head.size();
      std::string line = head.substr(pos, next - pos);
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        res.headers[name] = value;
      }
      pos = next + 2;
    }
    std::size_t length = res.headers.count("content-length") ? std::stoul(res.headers["content-length"]) : 0;
    while (pending_.size() < length)
      if (!fill(deadline)) return std::nullopt;
    res.body = pending_.substr(0, length);
    pending_.erase(0, length);
    return res;
  }

  // True when the peer closes (EOF or reset) within limit without sending anything more;
  // false on a timeout or unexpected bytes.
  bool closed_within(std::chrono::milliseconds limit) { return pending_.empty() && closes(limit, true); }

  // Exactly n bytes (after any response already read), or what arrived before the deadline.
  std::string read_exact(std::size_t n, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (pending_.size() < n)
      if (!fill(deadline)) break;
    std::string out = pending_.substr(0, n);
    pending_.erase(0, out.size());
    return out;
  }

  // True when the peer closes (EOF or reset) within limit, ignoring bytes still arriving.
  bool closes_after_draining(std::chrono::milliseconds limit = std::chrono::seconds(10)) { return closes(limit, false); }

 private:
  // Waits until a read would not block; false at the deadline.
  bool wait_readable(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      return r > 0;
    }
  }

  // strict: a byte before the close is a failure; otherwise bytes are read and dropped.
  bool closes(std::chrono::milliseconds limit, bool strict) {
    if (reset_at_connect) return true;
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (!wait_readable(deadline)) return false;
      char buf[4096];
      auto got = ::recv(fd_, buf, sizeof buf, 0);
      if (got == 0) return true;
      if (got < 0) return errno == ECONNRESET;
      if (strict) return false;
    }
  }

  bool fill(std::chrono::steady_clock::time_point deadline) {
    if (!wait_readable(deadline)) return false;
    char buf[16384];
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    pending_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string pending_;
};

}  // namespace sandfort::testing
