#include "process/output.hpp"

#include <algorithm>

namespace sandfort::agent {

std::string_view to_string(output_stream s) { return s == output_stream::out ? "stdout" : "stderr"; }

std::size_t complete_utf8_prefix(std::string_view bytes) {
  // Look back at most 3 bytes for the lead byte of the last sequence.
  std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(n, 3); ++back) {
    auto c = static_cast<unsigned char>(bytes[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for its lead
    std::size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

boost::asio::awaitable<void> output_collector::add(std::string_view bytes) {
  std::size_t room = cap_ - std::min(cap_, taken_);
  if (bytes.size() > room) {
    truncated_ = true;
    bytes = bytes.substr(0, room);
  }
  if (bytes.empty()) co_return;
  taken_ += bytes.size();
  if (!sink_) {
    data_.append(bytes);
    co_return;
  }
  if (sink_failed_) co_return;
  std::string joined = carry_;
  joined.append(bytes);
  std::size_t complete = complete_utf8_prefix(joined);
  carry_ = joined.substr(complete);
  if (complete == 0) co_return;
  std::string_view ready(joined.data(), complete);
  co_await forward(ready);
}

boost::asio::awaitable<void> output_collector::finish() {
  if (!sink_ || sink_failed_ || carry_.empty()) co_return;
  std::string rest = std::move(carry_);
  carry_.clear();
  std::string_view view(rest);
  co_await forward(view);
}

boost::asio::awaitable<void> output_collector::forward(std::string_view bytes) {
  bool ok = co_await sink_->write(which_, bytes);
  if (!ok) sink_failed_ = true;
}

}  // namespace sandfort::agent
