#pragma once
// For the preview tests: a fake directory, a small application standing in for what a sandbox
// runs on a port (echo of what it received, a large chunked answer, a WebSocket echo, a port
// that closes without answering), both servers on one io_context in a thread of their own,
// and a coroutine HTTP client. Everything is on 127.0.0.1.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>

#include "sandfort/http/server.hpp"
#include "sandfort/http/stream.hpp"
#include "sandfort/preview/server.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::preview::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

inline const std::string sandbox_a = "sbx-00000000000000aa";
inline const std::string sandbox_b = "sbx-00000000000000bb";

class fake_directory final : public preview_directory {
 public:
  void put(preview_target t) {
    std::lock_guard lock(mutex_);
    targets_[t.sandbox_id] = std::move(t);
  }
  std::optional<preview_target> find(const std::string& sandbox_id) override {
    std::lock_guard lock(mutex_);
    auto it = targets_.find(sandbox_id);
    if (it == targets_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, preview_target> targets_;
};

inline preview_target started(const std::string& id, std::string key = "a-sandbox-key") {
  preview_target t;
  t.sandbox_id = id;
  t.state = "started";
  t.address = "127.0.0.1";
  t.key = std::move(key);
  return t;
}

// A simple order-dependent checksum, so a reordered or corrupted body does not pass.
inline std::uint64_t checksum(std::uint64_t sum, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) sum = sum * 1099511628211ull + static_cast<unsigned char>(data[i]);
  return sum;
}

inline char pattern_byte(std::size_t i) { return static_cast<char>('a' + i % 26); }

namespace app {

// Answers with what it received: method, target, every header, the body's size and checksum.
inline asio::awaitable<bool> echo(http::exchange& ex) {
  std::vector<char> chunk(64 * 1024);
  std::uint64_t size = 0, sum = 0;
  while (!ex.parser.is_done()) {
    ex.parser.get().body().data = chunk.data();
    ex.parser.get().body().size = chunk.size();
    auto [ec, n] = co_await bhttp::async_read(ex.stream, ex.buffer, ex.parser, use_tuple);
    if (ec && ec != bhttp::error::need_buffer) co_return false;
    std::size_t got = chunk.size() - ex.parser.get().body().size;
    size += got;
    sum = checksum(sum, chunk.data(), got);
  }
  nlohmann::json headers = nlohmann::json::array();
  for (const auto& f : ex.parser.get()) headers.push_back({std::string(f.name_string()), std::string(f.value())});
  nlohmann::json seen = {{"method", std::string(ex.parser.get().method_string())},
                         {"target", std::string(ex.parser.get().target())},
                         {"headers", headers},
                         {"body_size", size},
                         {"body_sum", sum}};
  http::response res = http::json_response(200, seen);
  co_return co_await http::respond(ex, std::move(res));
}

// /large?bytes=N: N pattern bytes as a chunked answer, in 64 KiB pieces.
inline asio::awaitable<bool> large(http::exchange& ex) {
  std::size_t total = std::stoul(ex.query.at("bytes"));
  http::chunked_writer out(ex);
  std::string type = "application/octet-stream";
  if (!co_await out.start(200, type)) co_return false;
  std::string piece;
  for (std::size_t sent = 0; sent < total; sent += piece.size()) {
    piece.clear();
    for (std::size_t i = sent; i < total && piece.size() < 64 * 1024; ++i) piece.push_back(pattern_byte(i));
    if (!co_await out.write(piece)) co_return false;
  }
  co_return co_await out.finish();
}

// Echoes every message, except "?target", answered with the target it was upgraded on.
inline asio::awaitable<bool> websocket_echo(http::exchange& ex) {
  std::string upgraded_on(ex.parser.get().target());
  bhttp::request<bhttp::empty_body> upgrade{ex.parser.get().base()};
  beast::websocket::stream<http::any_stream&> ws(ex.stream);
  auto [ec] = co_await ws.async_accept(upgrade, use_tuple);
  if (ec) co_return false;
  for (;;) {
    beast::flat_buffer message;
    auto [rec, rn] = co_await ws.async_read(message, use_tuple);
    if (rec) break;
    ws.text(ws.got_text());
    if (beast::buffers_to_string(message.data()) == "?target") {
      message.consume(message.size());
      message.commit(asio::buffer_copy(message.prepare(upgraded_on.size()), asio::buffer(upgraded_on)));
    }
    auto [wec, wn] = co_await ws.async_write(message.data(), use_tuple);
    if (wec) break;
  }
  co_return false;
}

// Takes the request and hangs up without a word.
inline asio::awaitable<bool> hang_up(http::exchange&) {
  co_return false;
}

// Takes the request and says nothing for 5 s: an upstream that stalls.
inline asio::awaitable<bool> silent(http::exchange& ex) {
  asio::steady_timer timer(ex.stream.get_executor(), std::chrono::seconds(5));
  co_await timer.async_wait(use_tuple);
  co_return false;
}

inline http::stream_selector routes() {
  return [](const bhttp::request_header<>&, const std::string& path,
            std::map<std::string, std::string>&) -> http::stream_handler {
    if (path == "/large") return &large;
    if (path == "/ws") return &websocket_echo;
    if (path == "/hang-up") return &hang_up;
    if (path == "/silent") return &silent;
    return &echo;
  };
}

inline asio::awaitable<http::response> unused(http::context&) { co_return http::empty_response(500); }

}  // namespace app

// The application and the preview server on one io_context, run by a thread of their own.
class environment {
 public:
  explicit environment(preview_options options = {})
      : app_(ioc_, {}, &app::unused), preview_(ioc_, std::move(options), directory_) {
    app_.set_stream_selector(app::routes());
    auto app_port = app_.listen_tcp("127.0.0.1:0");
    auto preview_port = preview_.listen("127.0.0.1:0");
    if (!app_port || !preview_port) throw std::runtime_error("cannot listen on 127.0.0.1");
    app_port_ = *app_port;
    preview_port_ = *preview_port;
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~environment() {
    on_server_thread([this] {
      preview_.stop();
      app_.stop();
    });
    ioc_.stop();
    thread_.join();
  }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;

  fake_directory& directory() { return directory_; }
  preview_server& preview() { return preview_; }
  unsigned short app_port() const { return app_port_; }
  unsigned short preview_port() const { return preview_port_; }

  // The Host header that names port `port` of `sandbox_id` on this preview listener.
  std::string host(const std::string& sandbox_id, unsigned short port) const {
    return std::to_string(port) + "-" + sandbox_id + ".preview.localhost:" + std::to_string(preview_port_);
  }
  std::string app_host(const std::string& sandbox_id) const { return host(sandbox_id, app_port_); }

  template <typename F>
  auto on_server_thread(F fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto done = task.get_future();
    asio::post(ioc_, [&task] { task(); });
    if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
      throw std::runtime_error("the server thread did not run the task");
    return done.get();
  }

 private:
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(ioc_);
  fake_directory directory_;
  http::server app_;
  preview_server preview_;
  unsigned short app_port_ = 0;
  unsigned short preview_port_ = 0;
  std::thread thread_;
};

using reply = bhttp::response<bhttp::string_body>;

// One HTTP/1.1 connection to 127.0.0.1, for requests in sequence. Deadlines only guard
// against hangs.
class client {
 public:
  explicit client(const asio::any_io_executor& executor) : stream_(executor) {}

  asio::awaitable<bool> connect(unsigned short port) {
    stream_.expires_after(std::chrono::seconds(10));
    tcp::endpoint where(asio::ip::make_address_v4("127.0.0.1"), port);
    auto [ec] = co_await stream_.async_connect(where, use_tuple);
    co_return !ec;
  }

  // nullopt when the connection fails or closes before a whole answer.
  asio::awaitable<std::optional<reply>> send(bhttp::request<bhttp::string_body> req) {
    req.prepare_payload();
    stream_.expires_after(std::chrono::seconds(60));
    auto [wec, wn] = co_await bhttp::async_write(stream_, req, use_tuple);
    if (wec) co_return std::nullopt;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(boost::none);
    if (req.method() == bhttp::verb::head) parser.skip(true);
    auto [rec, rn] = co_await bhttp::async_read(stream_, buffer_, parser, use_tuple);
    if (rec) co_return std::nullopt;
    co_return parser.release();
  }

 private:
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

inline bhttp::request<bhttp::string_body> request(bhttp::verb method, const std::string& target,
                                                   const std::string& host) {
  bhttp::request<bhttp::string_body> req{method, target, 11};
  req.set(bhttp::field::host, host);
  return req;
}

// One request on a fresh connection, from the calling thread.
std::optional<reply> fetch(unsigned short port, bhttp::request<bhttp::string_body> req);

// The headers the application received, as (name, value) pairs in order.
std::vector<std::pair<std::string, std::string>> seen_headers(const reply& echoed);
std::string seen_header(const reply& echoed, const std::string& name);  // "" when absent

// A preview token for the environment's app port, signed with its key.
inline std::string token_for(const environment& env, const std::string& sandbox_id) {
  return make_token("a-sandbox-key", sandbox_id, env.app_port());
}

}  // namespace sandfort::preview::test
