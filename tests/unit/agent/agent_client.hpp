#pragma once
// For tests that drive the real sandfort-agent binary: start it on a temporary unix socket,
// and talk raw HTTP/1.1 to it so that bodies of any size can be streamed both ways
// without being held in memory (the library client reads whole responses).

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <openssl/evp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sandfort/http/client.hpp"
#include "agent_process.hpp"
#include "support/run_coroutine.hpp"

extern char** environ;

namespace sandfort::agent::test {

namespace bhttp = boost::beast::http;

inline std::string url_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

struct raw_response {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // unless streamed to a callback
  std::uint64_t body_size = 0;
  bool complete = false;  // the whole body arrived
  bool keep_alive = false;
};

// One connection, used synchronously. Reads time out after 60 s instead of hanging a test.
class raw_connection {
 public:
  explicit raw_connection(const std::string& socket) : sock_(ioc_) {
    sock_.connect(boost::asio::local::stream_protocol::endpoint(socket));
    struct timeval tv {60, 0};
    ::setsockopt(sock_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(sock_.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  void send(std::string_view bytes) { boost::asio::write(sock_, boost::asio::buffer(bytes.data(), bytes.size())); }

  // A request header; `length` < 0 means chunked.
  void send_head(std::string_view method, const std::string& target, long long length) {
    std::string head = std::string(method) + " " + target + " HTTP/1.1\r\nHost: agent\r\n";
    if (length >= 0)
      head += "Content-Length: " + std::to_string(length) + "\r\n";
    else
      head += "Transfer-Encoding: chunked\r\n";
    head += "\r\n";
    send(head);
  }

  void send_chunk(std::string_view data) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    send(size);
    send(data);
    send("\r\n");
  }
  void send_last_chunk() { send("0\r\n\r\n"); }

  // Reads one response. With on_body, the body goes there in pieces instead of into .body.
  raw_response read_response(const std::function<void(const char*, std::size_t)>& on_body = {}) {
    raw_response out;
    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.body_limit(boost::none);
    boost::system::error_code ec;
    bhttp::read_header(sock_, buffer_, parser, ec);
    if (ec) throw std::runtime_error("reading a response header: " + ec.message());
    out.status = parser.get().result_int();
    for (const auto& field : parser.get()) {
      std::string name(field.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(field.value());
    }
    auto chunk = std::make_unique<char[]>(64 * 1024);
    while (!parser.is_done()) {
      parser.get().body().data = chunk.get();
      parser.get().body().size = 64 * 1024;
      bhttp::read(sock_, buffer_, parser, ec);
      std::size_t n = 64 * 1024 - parser.get().body().size;
      if (n) {
        out.body_size += n;
        if (on_body)
          on_body(chunk.get(), n);
        else
          out.body.append(chunk.get(), n);
      }
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) break;
    }
    out.complete = parser.is_done();
    out.keep_alive = parser.get().keep_alive();
    return out;
  }

  void close() {
    boost::system::error_code ignored;
    sock_.close(ignored);
  }

 private:
  boost::asio::io_context ioc_;
  boost::asio::local::stream_protocol::socket sock_;
  boost::beast::flat_buffer buffer_;
};

class sha256 {
 public:
  sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~sha256() { EVP_MD_CTX_free(ctx_); }
  sha256(const sha256&) = delete;
  sha256& operator=(const sha256&) = delete;
  void update(const char* data, std::size_t n) { EVP_DigestUpdate(ctx_, data, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
      out.push_back(digits[md[i] >> 4]);
      out.push_back(digits[md[i] & 15]);
    }
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace sandfort::agent::test
