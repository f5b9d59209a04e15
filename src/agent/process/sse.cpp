#include "process/sse.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <sys/socket.h>

#include <cerrno>

#include "process/exec_json.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent {

namespace asio = boost::asio;

sse_writer::sse_writer(http::exchange& ex, bool binary)
    : ex_(ex), writer_(ex), gone_signal_(ex.stream.get_executor(), asio::steady_timer::time_point::max()), binary_(binary) {}

asio::awaitable<bool> sse_writer::write(output_stream which, std::string_view bytes) {
  if (bytes.empty()) co_return !failed_;
  std::string frame = http::sse_event(to_string(which), dump_json(chunk_json(bytes, binary_)));
  co_return co_await send_frame(std::move(frame));
}

asio::awaitable<bool> sse_writer::send(std::string_view event, const nlohmann::json& data) {
  std::string frame = http::sse_event(event, dump_json(data));
  co_return co_await send_frame(std::move(frame));
}

asio::awaitable<bool> sse_writer::keep_alive() {
  std::string frame = ": keep-alive\n\n";
  co_return co_await send_frame(std::move(frame));
}

asio::awaitable<void> sse_writer::start_locked() {
  if (started_ || failed_) co_return;
  started_ = true;
  const std::string content_type = "text/event-stream";
  if (!co_await writer_.start(200, content_type)) {
    failed_ = true;
    gone_signal_.cancel();
  }
}

asio::awaitable<bool> sse_writer::begin() {
  co_await order_.lock();
  fifo_lock held(order_);
  co_await start_locked();
  co_return !failed_;
}

asio::awaitable<bool> sse_writer::send_frame(std::string frame) {
  co_await order_.lock();
  fifo_lock held(order_);
  co_await start_locked();
  if (!failed_) {
    std::string_view view(frame);
    if (!co_await writer_.write(view)) {
      failed_ = true;
      gone_signal_.cancel();
    }
  }
  co_return !failed_;
}

asio::awaitable<bool> sse_writer::finish() {
  co_await order_.lock();
  fifo_lock held(order_);
  co_await start_locked();
  if (failed_) co_return false;
  co_return co_await writer_.finish();
}

bool sse_writer::gone_now() {
  if (failed_) return true;
  char c = 0;
  ssize_t n = ::recv(ex_.stream.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

// The client sends nothing while it reads an event stream, so the socket turning readable
// means it closed (EOF) or failed. Bytes of a pipelined request are not a departure.
asio::awaitable<void> sse_writer::wait_gone() {
  using namespace asio::experimental::awaitable_operators;
  auto& socket = ex_.stream.socket();
  while (!failed_) {
    auto which = co_await (ex_.stream.async_wait_readable(use_tuple) ||
                           gone_signal_.async_wait(use_tuple));
    if (which.index() == 1) co_return;
    auto [ec] = std::get<0>(which);
    if (ec) co_return;
    if (gone_now()) co_return;
    char c = 0;
    if (::recv(socket.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
      // A pipelined request: the client is still there; only a failed write can tell more.
      co_await gone_signal_.async_wait(use_tuple);
      co_return;
    }
  }
}

nlohmann::json error_json(const error& e) {
  return {{"error", {{"code", std::string(to_string(e.code))}, {"message", e.message}}}};
}

nlohmann::json chunk_json(std::string_view bytes, bool binary) {
  nlohmann::json j = {{"data", std::string(bytes)}};
  if (binary) j["data_b64"] = base64_encode(bytes);
  return j;
}

std::string dump_json(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

bool query_flag(const http::bhttp::request_header<>& header, const std::string& name) {
  std::string path;
  std::map<std::string, std::string> query;
  http::split_target(std::string_view(header.target().data(), header.target().size()), path, query);
  auto it = query.find(name);
  return it != query.end() && (it->second == "true" || it->second == "1");
}

}  // namespace sandfort::agent
