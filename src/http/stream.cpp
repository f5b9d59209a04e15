#include "sandfort/http/stream.hpp"

#include <algorithm>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "sandfort/http/use_tuple.hpp"

namespace sandfort::http {

stream_selector make_stream_selector(std::vector<stream_route> routes) {
  return [routes = std::move(routes)](const bhttp::request_header<>& header, const std::string& path,
                                      std::map<std::string, std::string>& params) -> stream_handler {
    for (const auto& r : routes) {
      if (r.method != header.method()) continue;
      std::map<std::string, std::string> p;
      if (!match_pattern(r.pattern, path, p)) continue;
      if (r.when && !r.when(header)) continue;
      params = std::move(p);
      return r.fn;
    }
    return {};
  };
}

boost::asio::awaitable<bool> respond(exchange& ex, response res) {
  res.set("X-Request-Id", ex.request_id);
  res.set("X-Content-Type-Options", "nosniff");
  res.keep_alive(ex.parser.get().keep_alive() && ex.parser.is_done());
  res.prepare_payload();
  auto [ec, n] = co_await bhttp::async_write(ex.stream, res, use_tuple);
  co_return !ec && res.keep_alive();
}

boost::asio::awaitable<bool> respond_error(exchange& ex, const error& e) {
  co_return co_await respond(ex, error_response(e, ex.request_id));
}

boost::asio::awaitable<result<std::string>> read_small_body(exchange& ex, std::size_t limit) {
  std::string out;
  char chunk[16 * 1024];
  ex.buffer.reserve(std::min(sizeof chunk, ex.buffer.max_size()));  // within its bound: reserve would raise it
  while (!ex.parser.is_done()) {
    ex.parser.get().body().data = chunk;
    ex.parser.get().body().size = sizeof chunk;
    auto [ec, n] = co_await bhttp::async_read(ex.stream, ex.buffer, ex.parser, use_tuple);
    if (ec && ec != bhttp::error::need_buffer) co_return make_error(errc::invalid_argument, "reading the body: " + ec.message());
    out.append(chunk, sizeof chunk - ex.parser.get().body().size);
    if (out.size() > limit) co_return make_error(errc::payload_too_large, "body exceeds " + std::to_string(limit) + " bytes");
  }
  co_return out;
}

boost::asio::awaitable<bool> chunked_writer::start(unsigned status, const std::string& content_type) {
  bhttp::response<bhttp::empty_body> head{static_cast<bhttp::status>(status), 11};
  head.set(bhttp::field::content_type, content_type);
  head.set(bhttp::field::cache_control, "no-store");
  head.set("X-Request-Id", ex_.request_id);
  head.chunked(true);
  head.keep_alive(ex_.parser.get().keep_alive() && ex_.parser.is_done());
  keep_alive_ = head.keep_alive();
  bhttp::response_serializer<bhttp::empty_body> sr{head};
  auto [ec, n] = co_await bhttp::async_write_header(ex_.stream, sr, use_tuple);
  co_return !ec;
}

boost::asio::awaitable<bool> chunked_writer::write(std::string_view bytes) {
  if (bytes.empty()) co_return true;
  auto [ec, n] = co_await boost::asio::async_write(
      ex_.stream, bhttp::make_chunk(boost::asio::const_buffer(bytes.data(), bytes.size())), use_tuple);
  co_return !ec;
}

boost::asio::awaitable<bool> chunked_writer::finish() {
  auto [ec, n] = co_await boost::asio::async_write(ex_.stream, bhttp::make_chunk_last(), use_tuple);
  co_return !ec && keep_alive_;
}

std::string sse_event(std::string_view event, std::string_view data) {
  std::string out = "event: ";
  out.append(event);
  out.push_back('\n');
  std::size_t start = 0;
  while (true) {
    auto nl = data.find('\n', start);
    out += "data: ";
    out.append(data.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    out.push_back('\n');
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out.push_back('\n');
  return out;
}

bool wants_event_stream(const bhttp::request_header<>& header) {
  auto it = header.find(bhttp::field::accept);
  return it != header.end() && it->value().find("text/event-stream") != boost::beast::string_view::npos;
}

}  // namespace sandfort::http
