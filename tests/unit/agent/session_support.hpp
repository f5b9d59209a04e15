#pragma once
// Helpers for the session, command and streaming tests: the real agent binary on a temporary
// socket, JSON calls, and a raw socket client that reads a response as it arrives (chunked,
// server-sent events) or leaves it unread (to queue requests, or to disconnect mid-stream).

#include <catch2/catch.hpp>

#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/http/client.hpp"
#include "agent_process.hpp"
#include "support.hpp"

extern char** environ;

namespace sandfort::agent::test {

using nlohmann::json;

struct reply {
  int status = 0;
  json body;
};

inline reply call(const std::string& socket, http::verb method, const std::string& target,
                  const json* body = nullptr) {
  http::client_options opts;
  opts.timeout = std::chrono::seconds(60);
  auto res = run_coroutine(http::unix_request(socket, http::make_request(method, target, body), opts));
  if (!res) throw std::runtime_error("call failed: " + res.err().message);
  reply r;
  r.status = res->result_int();
  if (!res->body().empty()) r.body = json::parse(res->body());
  return r;
}

inline reply post(const std::string& socket, const std::string& target, const json& body) {
  return call(socket, http::verb::post, target, &body);
}

struct sse_event {
  std::string name;
  std::string data;
  json payload() const { return json::parse(data); }
};

// One HTTP/1.1 exchange on its own connection, read incrementally with deadlines.
class raw_client {
 public:
  explicit raw_client(const std::string& socket_path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect failed");
  }
  ~raw_client() { close(); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void send(const std::string& method, const std::string& target, const std::string& body, bool events) {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\n";
    if (events) req += "Accept: text/event-stream\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    std::size_t sent = 0;
    while (sent < req.size()) {
      ssize_t n = ::send(fd_, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("send failed");
      sent += static_cast<std::size_t>(n);
    }
  }
  void post_json(const std::string& target, const json& body, bool events) { send("POST", target, body.dump(), events); }

  // Reads the status line and headers; returns the status.
  int read_head(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (raw_.find("\r\n\r\n") == std::string::npos)
      if (!fill(deadline)) throw std::runtime_error("no response head");
    auto end = raw_.find("\r\n\r\n");
    head_ = raw_.substr(0, end);
    raw_.erase(0, end + 4);
    chunked_ = lower(head_).find("transfer-encoding: chunked") != std::string::npos;
    return std::stoi(head_.substr(9, 3));
  }
  const std::string& head() const { return head_; }

  // The next server-sent event, or nullopt at the end of the stream or the deadline.
  std::optional<sse_event> next_event(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      auto end = body_.find("\n\n");
      if (end != std::string::npos) {
        std::string block = body_.substr(0, end);
        body_.erase(0, end + 2);
        sse_event e;
        std::size_t start = 0;
        while (start <= block.size()) {
          auto nl = block.find('\n', start);
          std::string line = block.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
          if (line.rfind("event: ", 0) == 0) e.name = line.substr(7);
          if (line.rfind("data: ", 0) == 0) e.data += (e.data.empty() ? "" : "\n") + line.substr(6);
          if (nl == std::string::npos) break;
          start = nl + 1;
        }
        return e;
      }
      if (ended_) return std::nullopt;
      if (!decode_some(deadline)) return std::nullopt;
    }
  }

  // The whole (non-streamed) body after read_head.
  std::string read_body(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    if (chunked_) {
      while (!ended_ && decode_some(deadline)) {
      }
      return body_;
    }
    auto pos = lower(head_).find("content-length: ");
    std::size_t length = pos == std::string::npos ? 0 : std::stoul(head_.substr(pos + 16));
    while (raw_.size() < length)
      if (!fill(deadline)) break;
    return raw_.substr(0, length);
  }

  // Everything decoded but not yet returned as an event.
  const std::string& pending() const { return body_; }

 private:
  static std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  bool fill(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    raw_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  // Moves whole chunks from raw_ to body_; false at the deadline or EOF.
  bool decode_some(std::chrono::steady_clock::time_point deadline) {
    while (true) {
      auto nl = raw_.find("\r\n");
      if (nl != std::string::npos) {
        std::size_t size = std::stoul(raw_.substr(0, nl), nullptr, 16);
        if (size == 0) {
          ended_ = true;
          return true;
        }
        if (raw_.size() >= nl + 2 + size + 2) {
          body_ += raw_.substr(nl + 2, size);
          raw_.erase(0, nl + 2 + size + 2);
          return true;
        }
      }
      if (!fill(deadline)) return false;
    }
  }

  int fd_ = -1;
  std::string raw_;
  std::string head_;
  std::string body_;
  bool chunked_ = false;
  bool ended_ = false;
};

// Bounded wait for a condition checked every few milliseconds (tests only).
template <typename Check>
bool eventually(Check check, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return check();
}

inline bool alive(pid_t pid) { return ::kill(pid, 0) == 0 && !is_zombie(pid); }
inline bool gone(pid_t pid) {
  return eventually([pid] { return !alive(pid); });
}

}  // namespace sandfort::agent::test
