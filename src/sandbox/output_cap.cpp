// Holding an agent's output to the cap (output_cap.hpp).
#include "output_cap.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

namespace sandfort::sandbox {

namespace {

// A whole event of the agent's: more is not the agent (its largest is a 64 KiB chunk, escaped:
// at most 6 x 64 KiB and its base64, about 470 KiB). Each event is parsed on the I/O thread, so
// this also bounds the stall one event can cause (a few milliseconds; 4 MiB took tens).
constexpr std::size_t max_event_bytes = 1u << 20;

void hold_to_cap(std::string& text, std::optional<std::string>& b64, std::uint64_t cap, bool& truncated) {
  if (text.size() > cap) {
    text.resize(char_boundary(text, static_cast<std::size_t>(cap)));
    truncated = true;
  }
  const std::uint64_t whole_groups = cap / 3 * 4;
  if (b64 && b64->size() > (cap + 2) / 3 * 4) {
    b64->resize(static_cast<std::size_t>(whole_groups));
    truncated = true;
  }
}

// The event's data lines, joined as SSE joins them.
std::string data_of(std::string_view lines) {
  std::string data;
  for (std::size_t at = 0; at < lines.size();) {
    auto end = std::min(lines.find('\n', at), lines.size());
    std::string_view line = lines.substr(at, end - at);
    if (line.starts_with("data: ")) data.append(data.empty() ? "" : "\n").append(line.substr(6));
    at = end + 1;
  }
  return data;
}

// JSON escapes every control character, so the frame has exactly the two lines it is built of.
std::string frame(std::string_view name, const nlohmann::json& j) {
  std::string out = "event: ";
  out.append(name).append("\ndata: ");
  out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out + "\n\n";
}

}  // namespace

std::size_t char_boundary(std::string_view s, std::size_t at) {
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
  return at;
}

void hold_to_cap(exec_result& r, std::uint64_t cap) {
  hold_to_cap(r.stdout_text, r.stdout_b64, cap, r.truncated);
  hold_to_cap(r.stderr_text, r.stderr_b64, cap, r.truncated);
}

boost::asio::awaitable<bool> capped_events::write(std::string_view bytes) {
  pending_.append(bytes);
  std::size_t start = 0;
  for (auto end = pending_.find("\n\n"); end != std::string::npos; end = pending_.find("\n\n", start)) {
    bool relayed = co_await relay(std::string_view(pending_).substr(start, end + 2 - start));
    if (!relayed) co_return false;
    start = end + 2;
  }
  pending_.erase(0, start);
  co_return pending_.size() <= max_event_bytes;
}

boost::asio::awaitable<bool> capped_events::relay(std::string_view event) {
  auto newline = event.find('\n');
  std::string_view name = event.substr(0, newline);
  if (finished_ || !name.starts_with("event: ")) co_return true;
  name.remove_prefix(7);
  if (name != "stdout" && name != "stderr" && name != "exit" && name != "error") co_return true;
  auto j = nlohmann::json::parse(data_of(event.substr(newline + 1)), nullptr, false);
  if (name == "exit" || name == "error") {
    // Never passed on as sent: the agent's own bytes could carry more `event:` lines (the last
    // one names an SSE event, so "exit" could reach the caller as more output).
    finished_ = true;
    if (!j.is_object()) {
      nlohmann::json failure;
      failure["error"]["code"] = "internal";
      failure["error"]["message"] = "the agent sent a malformed " + std::string(name) + " event";
      co_return co_await emit("error", failure);
    }
    if (name == "exit" && cut_) j["truncated"] = true;
    co_return co_await emit(name, j);
  }
  if (!j.is_object() || !j.contains("data") || !j["data"].is_string()) co_return true;
  co_return co_await relay_output(name, name == "stdout" ? 0 : 1, j);
}

boost::asio::awaitable<bool> capped_events::relay_output(std::string_view name, int stream, nlohmann::json& j) {
  std::string text = std::move(j["data"].get_ref<std::string&>());
  std::optional<std::string> b64;
  if (j.contains("data_b64") && j["data_b64"].is_string()) b64 = std::move(j["data_b64"].get_ref<std::string&>());
  const std::uint64_t room = cap_ - sent_[stream];
  if (text.size() > room) cut_ = true;
  bool ignored = false;
  hold_to_cap(text, b64, std::min<std::uint64_t>(room, text.size()), ignored);
  if (text.empty()) co_return true;
  sent_[stream] += text.size();
  nlohmann::json chunk = {{"data", std::move(text)}};
  if (b64) chunk["data_b64"] = std::move(*b64);
  co_return co_await emit(name, chunk);
}

boost::asio::awaitable<bool> capped_events::emit(std::string_view name, const nlohmann::json& data) {
  wrote_ = true;
  co_return co_await out_.write(frame(name, data));
}

boost::asio::awaitable<bool> capped_events::fail(const error& e) {
  if (finished_ || !wrote_) co_return false;
  finished_ = true;
  nlohmann::json failure;
  failure["error"]["code"] = std::string(to_string(e.code));
  failure["error"]["message"] = e.message;
  co_await emit("error", failure);
  co_return true;
}

}  // namespace sandfort::sandbox
